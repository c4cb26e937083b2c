#!/usr/bin/env bash
# Step 13's three compute-bound targets against PyTorch, each in one process with interleaved
# rounds (bench/same_call_compare.py), from the relocatable bundle:
#   1. `kiln export T --template --params <best> --format torch` for each target (the best
#      configurations of bench/best_configs.sh; the export verifies the kernel on this GPU first);
#   2. the extensions built side by side;
#   3. same_call_compare.py per target: fused_mlp against eager and torch.compile, matmul against
#      cuBLAS (PyTorch eager), flash_attention against SDPA (PyTorch eager); with --rest-ms 400
#      (every batch starts at full clock) and --pad-us 1000 (the host's enqueue time does not
#      count), which SAME_CALL_ARGS may override ("--rest-ms 0 --pad-us 0": sustained load, host
#      time included).
# Usage: bench/same_call_lease.sh TARBALL OUTDIR. Env:
#   SAME_CALL_TARGETS  targets, comma-separated (default: the three);
#   SAME_CALL_DTYPE    f16 or bf16 (default: the export's own, f16);
#   SAME_CALL_ARGS     more options for every compare, e.g. "--rounds 20";
#   EXPORTS_DIR        where the exports go (default: a folder under /tmp; they hold many files).
# Progress: OUTDIR/progress.log; per target OUTDIR/T.md (the table) and OUTDIR/T.json (every
# sample). Keep OUTDIR small when it is a device call's $OUT: only a few files come back.
set -uo pipefail
tarball=${1:?usage: bench/same_call_lease.sh TARBALL OUTDIR}
out=${2:?usage: bench/same_call_lease.sh TARBALL OUTDIR}
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
mkdir -p "$out"
out=$(cd "$out" && pwd)
log() { echo "[$(date -u +%H:%M:%S)] $*" | tee -a "$out/progress.log" >&2; }

source "$repo/bench/torch_exports.sh"
unpack_bundle "$tarball" kiln-same-call || { log "cannot unpack $tarball"; exit 2; }
kiln="$bundle/bin/kiln"
log "kiln: $("$kiln" version 2>&1 | head -1)"
nvidia-smi --format=csv \
  --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw,power.limit >> "$out/progress.log" 2>&1

source "$repo/bench/best_configs.sh"
targets=${SAME_CALL_TARGETS:-fused_mlp,matmul,flash_attention}
declare -A compile=([fused_mlp]=default [matmul]=none [flash_attention]=none)
exports=${EXPORTS_DIR:-$(mktemp -d /tmp/kiln-same-call-exports.XXXXXX)}
dirs=()
for t in ${targets//,/ }; do
  export_torch "$t" "${best[$t]}" "$exports/$t" "$out/export-$t.log" \
    ${SAME_CALL_DTYPE:+--dtype "$SAME_CALL_DTYPE"}
  rc=$?
  log "export $t: rc=$rc $(grep -E '^(  time:|wrote|kiln export:)' "$out/export-$t.log" | tr '\n' ' ' | cut -c1-300)"
  [[ $rc == 0 ]] && dirs+=("$exports/$t")
done
for d in "${dirs[@]}"; do
  t=$(basename "$d")
  ( build_torch "$d" "$out/build-$t.log"; echo "build $t rc=$?" >> "$out/progress.log" ) &
done
wait
for d in "${dirs[@]}"; do
  t=$(basename "$d")
  # shellcheck disable=SC2086
  timeout 400 python3 "$repo/bench/same_call_compare.py" "$d" --compile "${compile[$t]:-default}" \
    --rest-ms 400 --pad-us 1000 --out "$out/$t.json" ${SAME_CALL_ARGS:-} > "$out/$t.md" 2>&1
  log "compare $t: rc=$?"
  cat "$out/$t.md" >&2
done
nvidia-smi --query-gpu=clocks.sm,temperature.gpu,power.draw --format=csv >> "$out/progress.log" 2>&1
log "done"
