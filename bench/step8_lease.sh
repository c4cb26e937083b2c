#!/usr/bin/env bash
# The step-8 checks on a GPU machine, from the relocatable bundle:
#   1. scripts/gpu_check: every GPU-labelled test of the bundle;
#   2. `kiln run --backend cuda` on two targets (local evaluators, one per GPU);
#   3. a farm by hand: `kiln coordinator --gpu-models auto` on loopback and one `kiln evaluator`
#      per GPU connecting to it: the populations must be named by the GPU model the evaluators
#      announce (summary.json "gpu_model"), never "".
# Usage: bench/step8_lease.sh TARBALL OUTDIR. Env: STEP8_SKIP_CHECK=1, STEP8_BUDGET (default 60s).
# Progress: OUTDIR/progress.log.
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

log "kiln run: start"
KILN_CACHE_DIR=/tmp/kiln-step8-cache timeout 600 "$kiln" run --backend cuda --targets rmsnorm,softmax \
  --budget "$budget" --out "$out/run" > "$out/run.log" 2>&1
log "kiln run: rc=$? $(grep -c '"state"' "$out/run/summary.json" 2>/dev/null) targets in summary.json"

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
