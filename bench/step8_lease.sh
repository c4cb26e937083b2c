#!/usr/bin/env bash
# The step-8 checks on a GPU machine, from the relocatable bundle:
#   1. scripts/gpu_check: every GPU-labelled test of the bundle;
#   2. `kiln run --backend cuda` on two targets (local evaluators, one per GPU);
#   3. a farm by hand: `kiln coordinator --gpu-models auto` on loopback and one `kiln evaluator`
#      per GPU connecting to it: the populations must be named by the GPU model the evaluators
#      announce (summary.json "gpu_model"), never "".
#   4. (STEP8_CHEAT_REPEAT=N) the timing cheats and their honest control N times more each
#      (bimodal_work, skips_alternate_launches, honest), counting how often each met its verdict;
#   5. (STEP8_TWO_MODELS=1) a farm of two evaluators on GPU 0 that announce different models
#      (`--gpu-model`): two populations, and every result's unit is that of its evaluator's model.
# Usage: bench/step8_lease.sh TARBALL OUTDIR. Env: STEP8_SKIP_CHECK=1, STEP8_SKIP_RUN=1,
# STEP8_BUDGET (default 60s), STEP8_CHEAT_REPEAT, STEP8_TWO_MODELS. Progress: OUTDIR/progress.log.
set -uo pipefail
tarball=${1:?usage: bench/step8_lease.sh TARBALL OUTDIR}
out=${2:?usage: bench/step8_lease.sh TARBALL OUTDIR}
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
budget=${STEP8_BUDGET:-60s}
mkdir -p "$out"
log() { echo "[$(date -u +%H:%M:%S)] $*" | tee -a "$out/progress.log" >&2; }

unpacked=$(mktemp -d /tmp/kiln-step8.XXXXXX)
tar -C "$unpacked" -xzf "$tarball" || { log "cannot unpack $tarball"; exit 2; }
bundle=$(ls -d "$unpacked"/kiln-*/ | head -1)
kiln="$bundle/bin/kiln"
log "kiln: $("$kiln" version 2>&1 | head -1)"
nvidia-smi -L >> "$out/progress.log" 2>&1

if [[ "${STEP8_SKIP_CHECK:-0}" != 1 ]]; then
  log "gpu_check: start"
  KILN_CACHE_DIR=/tmp/kiln-step8-check OUT="$out/gpu_check" timeout 1500 "$repo/scripts/gpu_check" "$bundle" \
    > "$out/gpu_check.log" 2>&1
  log "gpu_check: rc=$? $(tail -1 "$out/gpu_check.log")"
fi

if [[ "${STEP8_CHEAT_REPEAT:-0}" -gt 0 ]]; then
  for cheat in bimodal_work skips_alternate_launches honest; do
    pass=0 fail=0
    for _ in $(seq "$STEP8_CHEAT_REPEAT"); do
      if KILN_BIN="$kiln" KILN_CACHE_DIR=/tmp/kiln-step8-check KILN_SOURCE_DIR="$bundle/source" \
        "$bundle/tests/kiln_gpu_tests" --gtest_filter="*CudaCheats.IsCaughtAtItsStage/$cheat" \
        >> "$out/cheat-repeat-$cheat.log" 2>&1; then pass=$((pass + 1)); else fail=$((fail + 1)); fi
    done
    log "cheat repeat: $cheat met its verdict $pass of $((pass + fail)) times"
  done
fi

if [[ "${STEP8_SKIP_RUN:-0}" != 1 ]]; then
  log "kiln run: start"
  KILN_CACHE_DIR=/tmp/kiln-step8-cache timeout 600 "$kiln" run --backend cuda --targets rmsnorm,softmax \
    --budget "$budget" --out "$out/run" > "$out/run.log" 2>&1
  log "kiln run: rc=$? $(grep -c '"state"' "$out/run/summary.json" 2>/dev/null) targets in summary.json"
fi

if [[ "${STEP8_TWO_MODELS:-0}" == 1 ]]; then
  log "two models: start"
  port=$((20000 + RANDOM % 20000))
  KILN_CACHE_DIR=/tmp/kiln-step8-cache timeout 600 "$kiln" coordinator --backend cuda --gpu-models auto \
    --targets rmsnorm --budget "$budget" --bind "tcp://127.0.0.1:$port" --out "$out/models" \
    > "$out/models-coordinator.log" 2>&1 &
  coord=$!
  sleep 3
  pids=()
  for m in alpha beta; do
    KILN_CACHE_DIR=/tmp/kiln-step8-cache "$kiln" evaluator --connect "tcp://127.0.0.1:$port" --backend cuda \
      --gpu 0 --gpu-model "H100-$m" --worker-id "eval-$m" > "$out/models-evaluator-$m.log" 2>&1 &
    pids+=($!)
  done
  wait "$coord"
  log "two models: coordinator rc=$?"
  for p in "${pids[@]}"; do wait "$p"; done
  log "two models: populations $(grep -o '"gpu_model": *"[^"]*"' "$out/models/summary.json" 2>/dev/null | sort -u | tr '\n' ' ')"
  log "two models: results by evaluator model and unit: $(python3 -c '
import json, sys, collections
c = collections.Counter()
for line in open(sys.argv[1]):
    r = json.loads(line)
    c[(r.get("evaluator_gpu_model"), r.get("unit"))] += 1
print(dict(c))' "$out/models/results.jsonl" 2>&1)"
fi

[[ "${STEP8_SKIP_RUN:-0}" == 1 ]] && { log "DONE"; exit 0; }
log "farm: start"
port=$((20000 + RANDOM % 20000))
KILN_CACHE_DIR=/tmp/kiln-step8-cache timeout 600 "$kiln" coordinator --backend cuda --gpu-models auto \
  --targets rmsnorm --budget "$budget" --bind "tcp://127.0.0.1:$port" --out "$out/farm" > "$out/farm-coordinator.log" 2>&1 &
coord=$!
sleep 3
pids=()
for g in $(nvidia-smi --query-gpu=index --format=csv,noheader); do
  KILN_CACHE_DIR=/tmp/kiln-step8-cache "$kiln" evaluator --connect "tcp://127.0.0.1:$port" --backend cuda --gpu "$g" \
    > "$out/farm-evaluator-$g.log" 2>&1 &
  pids+=($!)
done
wait "$coord"
log "farm: coordinator rc=$?"
for p in "${pids[@]}"; do
  wait "$p"
  log "farm: evaluator rc=$? (0: it exited on the coordinator's 'finished')"
done
log "farm: gpu models in summary.json: $(grep -o '"gpu_model": *"[^"]*"' "$out/farm/summary.json" 2>/dev/null | sort -u | tr '\n' ' ')"
log "DONE"
