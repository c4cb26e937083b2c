#!/usr/bin/env bash
# The step-7 measurements on a GPU machine, in one sitting so the figures share a machine:
#   1. scripts/gpu_check: every GPU-labelled test of the bundle (the cuda cheat suite included);
#   2. kiln eval of each built-in target's best configuration (recorded in
#      bench/results/2026-11-24-H100-kiln-run-nine-targets.md), with the hardened binary and the
#      one before it, alternating, ROUNDS times: the medians must move by less than 2%;
#   3. the evaluation rate, `kiln eval rmsnorm --sweep --limit N`, with both binaries: the
#      hardening may cost at most 15% of it;
#   4. every template configuration of each target, verification only, with the hardened binary:
#      honest configurations must all pass (STEP7_SWEEPS: which targets; empty: none).
# Usage: bench/step7_lease.sh NEW_TARBALL OLD_KILN_BINARY OUTDIR
#   OLD_KILN_BINARY is a kiln built from the commit before the hardening; it runs with the new
#   bundle's libraries and targets. Env: ROUNDS (default 2), SWEEP_LIMIT (default 20),
#   STEP7_SKIP_CHECK=1, STEP7_TARGETS (default all nine), ROUNDS=0 (no best-configuration evals),
#   STEP7_RATE=0 (no evaluation rate). Progress: OUTDIR/progress.log, then DONE.
set -uo pipefail
tarball=${1:?usage: bench/step7_lease.sh NEW_TARBALL OLD_KILN_BINARY OUTDIR}
old_src=${2:?usage: bench/step7_lease.sh NEW_TARBALL OLD_KILN_BINARY OUTDIR}
out=${3:?usage: bench/step7_lease.sh NEW_TARBALL OLD_KILN_BINARY OUTDIR}
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
mkdir -p "$out"
log() { echo "[$(date -u +%H:%M:%S)] $*" | tee -a "$out/progress.log" >&2; }

unpacked=$(mktemp -d /tmp/kiln-step7.XXXXXX)
tar -C "$unpacked" -xzf "$tarball" || { log "cannot unpack $tarball"; exit 2; }
bundle=$(ls -d "$unpacked"/kiln-*/ | head -1)
new="$bundle/bin/kiln"
old="$bundle/bin/kiln-old"
cp "$old_src" "$old" && chmod +x "$old"
export LD_LIBRARY_PATH="$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
log "new: $("$new" version 2>&1 | head -1); old: $("$old" version 2>&1 | head -1)"
nvidia-smi -L >> "$out/progress.log" 2>&1

if [[ "${STEP7_SKIP_CHECK:-0}" != 1 ]]; then
  log "gpu_check: start"
  KILN_CACHE_DIR=/tmp/kiln-step7-check OUT="$out/gpu_check" timeout 1500 "$repo/scripts/gpu_check" "$bundle" \
    > "$out/gpu_check.log" 2>&1
  log "gpu_check: rc=$? $(tail -1 "$out/gpu_check.log")"
fi

source "$repo/bench/best_configs.sh"
targets=${STEP7_TARGETS:-rmsnorm,softmax,reduce,layernorm,rotary_embedding,cross_entropy,matmul,flash_attention,fused_mlp}
mkdir -p "$out/evals"
: > "$out/medians.tsv"
for round in $(seq 1 "${ROUNDS:-2}"); do
  for t in ${targets//,/ }; do
    for which in old new; do
      bin=$old; [[ $which == new ]] && bin=$new
      f="$out/evals/$t-$which-$round.json"
      KILN_CACHE_DIR=/tmp/kiln-step7-$which timeout 300 "$bin" eval "$t" --params "${best[$t]}" --json \
        > "$f" 2> "$out/evals/$t-$which-$round.err"
      line=$(python3 - "$f" "$t" "$which" "$round" <<'PY'
import json, sys
f, t, which, rnd = sys.argv[1:]
try:
    r = json.load(open(f))
except Exception as e:
    print(f"{t}\t{which}\t{rnd}\tunreadable\t0\t0\t0\t0"); sys.exit()
tm, m = r.get("timing", {}), r.get("metrics", {})
print(f"{t}\t{which}\t{rnd}\t{r.get('outcome')}\t{tm.get('median_us', 0)}\t{tm.get('noise_rel', 0)}\t{tm.get('samples', 0)}\t{r.get('wall_ms', 0)}")
PY
)
      echo "$line" >> "$out/medians.tsv"
      log "eval $line"
    done
  done
done

for which in old new; do
  [[ "${STEP7_RATE:-1}" == 0 ]] && break
  bin=$old; [[ $which == new ]] && bin=$new
  log "evaluation rate ($which): start"
  start=$(date +%s.%N)
  KILN_CACHE_DIR=/tmp/kiln-step7-rate-$which timeout 600 "$bin" eval rmsnorm --sweep --limit "${SWEEP_LIMIT:-20}" \
    --json > "$out/rate-$which.json" 2> "$out/rate-$which.txt"
  rc=$?
  end=$(date +%s.%N)
  # The sweep's own wall time leaves out the process start and the once-per-host ceilings.
  sweep_s=$(python3 -c "import json; print(round(json.load(open('$out/rate-$which.json'))['wall_s'], 1))" 2>/dev/null)
  log "evaluation rate ($which): rc=$rc, $(python3 -c "print(f'{$end - $start:.1f}')") s wall, sweep ${sweep_s:-?} s; $(grep -c 'verified' "$out/rate-$which.txt") verified lines"
  # Where an evaluation's time goes: the median of each *_ms metric over the evaluations after
  # the first (which also compiles and warms the host buffers).
  python3 - "$out/rate-$which.json" <<'PY' | tee -a "$out/progress.log" >&2
import json, statistics, sys
try:
    results = json.load(open(sys.argv[1]))["results"][1:]
except Exception as e:
    print(f"  no per-evaluation metrics: {e}"); sys.exit()
keys = sorted({k for r in results for k in r.get("metrics", {}) if k.endswith("_ms")})
walls = [r["wall_ms"] for r in results]
print(f"  median wall per evaluation {statistics.median(walls):.0f} ms over {len(walls)}; " +
      ", ".join(f"{k} {statistics.median([r['metrics'].get(k, 0) for r in results]):.0f}" for k in keys))
PY
done
# Every honest template configuration must pass the new stages (the precision factor above all):
# each target's whole template space, verification only, with the hardened binary.
if [[ -n "${STEP7_SWEEPS-$targets}" ]]; then
  mkdir -p "$out/sweeps"
  for t in ${STEP7_SWEEPS-$targets}; do
    t=${t//,/ }
    for one in $t; do
      KILN_CACHE_DIR=/tmp/kiln-step7-new timeout 900 "$new" eval "$one" --sweep --no-time \
        > "$out/sweeps/$one.txt" 2>&1
      log "sweep $one (verify only): rc=$? $(grep -c 'verified' "$out/sweeps/$one.txt") verified lines; $(tail -1 "$out/sweeps/$one.txt")"
    done
  done
fi
log "done"
: > "$out/DONE"
