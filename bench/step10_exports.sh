#!/usr/bin/env bash
# The step-10 checks on a GPU machine, from the relocatable bundle:
#   1. `kiln export T --format torch` of the best configuration of each built-in target (the
#      configurations the nine-target runs crowned; bench/results/2026-11-24-H100-step7-hardening.md),
#      which verifies each kernel on this GPU before writing it; then bench/torch_export_check.py:
#      each module against its PyTorch formulation with torch.testing.assert_close at three shapes,
#      both timed (torch_check.json);
#   2. `kiln verify` of one export (it re-runs the record here);
#   3. the leaderboard workflow: `kiln run` on vectorsum_v2 and prefixsum_v2, `kiln export
#      --format gpumode` of each best, then GPU MODE's own eval.py in test and benchmark modes
#      (its files come from GPUMODE_DIR: eval.py, utils.py and per problem reference.py, task.py,
#      tests.txt, bench.txt, fetched from gpu-mode/reference-kernels; nothing of it is committed).
# Usage: bench/step10_exports.sh TARBALL OUTDIR [GPUMODE_DIR]. Env: STEP10_TARGETS (default: all
# nine), STEP10_BUDGET (the leaderboard run's budget, default 120s), STEP10_SKIP_TORCH=1,
# STEP10_SKIP_LB=1, STEP10_LB_PARAMS="vectorsum=K=V,..;prefixsum=K=V,.." (submit those template
# configurations instead of a run's bests). Progress: OUTDIR/progress.log.
set -uo pipefail
tarball=${1:?usage: bench/step10_exports.sh TARBALL OUTDIR [GPUMODE_DIR]}
out=${2:?usage: bench/step10_exports.sh TARBALL OUTDIR [GPUMODE_DIR]}
gm=${3:-}
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
mkdir -p "$out"
out=$(cd "$out" && pwd)
log() { echo "[$(date -u +%H:%M:%S)] $*" | tee -a "$out/progress.log" >&2; }

unpacked=$(mktemp -d /tmp/kiln-step10.XXXXXX)
tar -C "$unpacked" -xzf "$tarball" || { log "cannot unpack $tarball"; exit 2; }
bundle=$(ls -d "$unpacked"/kiln-*/ | head -1)
kiln="$bundle/bin/kiln"
export PATH="$bundle/bin:$PATH" TORCH_EXTENSIONS_DIR=/tmp/kiln-step10-ext PYTHONUNBUFFERED=1
log "kiln: $("$kiln" version 2>&1 | head -1)"
nvidia-smi -L >> "$out/progress.log" 2>&1
python3 -c 'import torch, sys; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda)' \
  >> "$out/progress.log" 2>&1

source "$repo/bench/best_configs.sh"
targets=${STEP10_TARGETS:-rmsnorm,softmax,reduce,layernorm,rotary_embedding,cross_entropy,matmul,flash_attention,fused_mlp}

if [[ "${STEP10_SKIP_TORCH:-0}" != 1 ]]; then
  mkdir -p "$out/exports"
  dirs=()
  for t in ${targets//,/ }; do
    log "export $t: start"
    timeout 300 "$kiln" export "$t" --template --params "${best[$t]}" --format torch --to "$out/exports/$t-torch" \
      > "$out/exports/$t.log" 2>&1
    rc=$?
    log "export $t: rc=$rc $(grep -E '^(  time:|wrote|kiln export:)' "$out/exports/$t.log" | tr '\n' ' ' | cut -c1-300)"
    [[ $rc == 0 ]] && dirs+=("$out/exports/$t-torch")
  done
  # Build the extensions side by side (nvcc is single-threaded per file), then check one by one.
  log "torch builds: ${#dirs[@]} in parallel"
  for d in "${dirs[@]}"; do
    t=$(basename "$d" -torch)
    ( cd "$d" && timeout 400 python3 -c "import sys; sys.path.insert(0, '.'); import $t; $t._ext()" \
        > "$d/build.log" 2>&1; echo "build $t rc=$?" >> "$out/progress.log" ) &
  done
  wait
  log "torch check: start"
  timeout 900 python3 "$repo/bench/torch_export_check.py" --out "$out/torch_check.json" "${dirs[@]}" \
    > "$out/torch_check.log" 2>&1
  log "torch check: rc=$? $(tail -1 "$out/torch_check.log")"
  if [[ -d "$out/exports/flash_attention-torch" ]]; then
    timeout 300 "$kiln" verify "$out/exports/flash_attention-torch" > "$out/verify_flash_attention.log" 2>&1
    log "kiln verify flash_attention-torch: rc=$? $(grep -E '^(verdict|  timing)' "$out/verify_flash_attention.log" | tr '\n' ' ')"
    timeout 400 python3 "$repo/bench/torch_build_probe.py" "$out/exports/flash_attention-torch" > "$out/build_probe.log" 2>&1
    log "build probe: rc=$? $(tr '\n' ' ' < "$out/build_probe.log" | cut -c1-400)"
  fi
  if [[ -d "$out/exports/reduce-torch" ]]; then
    timeout 300 "$kiln" verify "$out/exports/reduce-torch" > "$out/verify_reduce.log" 2>&1
    log "kiln verify reduce-torch: rc=$? $(grep -E '^(verdict|  timing)' "$out/verify_reduce.log" | tr '\n' ' ')"
  fi
fi

if [[ "${STEP10_SKIP_LB:-0}" != 1 ]]; then
  log "leaderboard run: start"
  [[ -n "${STEP10_LB_PARAMS:-}" ]] || timeout 600 "$kiln" run --targets vectorsum_v2,prefixsum_v2 --backend cuda --budget "${STEP10_BUDGET:-120s}" \
    --out "$out/lbrun" > "$out/lbrun.log" 2>&1
  [[ -f "$out/lbrun.log" ]] && log "leaderboard run: rc=$? $(grep -E '^(vectorsum_v2|prefixsum_v2) ' "$out/lbrun.log" | tail -2 | tr '\n' ' ')"
  for p in vectorsum prefixsum; do
    sub="$out/gpumode/$p"
    from=(--out "$out/lbrun")
    if [[ -n "${STEP10_LB_PARAMS:-}" ]]; then  # "vectorsum=K=V,...;prefixsum=K=V,...": a configuration, no run
      params=$(tr ';' '\n' <<< "$STEP10_LB_PARAMS" | sed -n "s/^$p=//p")
      from=(--template --params "$params")
    fi
    timeout 600 "$kiln" export ${p}_v2 "${from[@]}" --format gpumode --to "$sub" > "$out/export_$p.log" 2>&1
    log "export ${p}_v2 gpumode: rc=$? $(grep -E '^(wrote|kiln export:)' "$out/export_$p.log" | tr '\n' ' ' | cut -c1-300)"
    [[ -f "$sub/submission.py" && -n "$gm" ]] || continue
    work="$out/gpumode/$p-eval"
    mkdir -p "$work"
    cp "$gm/eval.py" "$gm/utils.py" "$gm/$p/reference.py" "$gm/$p/task.py" "$gm/$p/tests.txt" "$gm/$p/bench.txt" "$work/"
    cp "$sub/submission.py" "$work/"
    ( cd "$work" && timeout 300 python3 submission.py > compile.txt 2>&1; echo "compile rc=$?" >> compile.txt )
    for mode in test benchmark; do
      cases=tests.txt; [[ $mode == benchmark ]] && cases=bench.txt
      ( cd "$work" && POPCORN_FD=3 timeout 420 python3 eval.py $mode $cases 3> "$mode.popcorn.txt" > "$mode.stdout.txt" \
          2> "$mode.stderr.txt"; echo "rc=$?" >> "$mode.popcorn.txt" )
      log "eval.py $p $mode: $(grep -E '^(check|rc|benchmark-count|benchmark\.[0-9]+\.mean):' "$work/$mode.popcorn.txt" | tr '\n' ' ' | cut -c1-600)"
    done
  done
fi
log "done"
