#!/usr/bin/env bash
# Evaluations per hour of `kiln run` on one GPU and on two GPUs of one machine (issues #5 and #20:
# two GPUs must give >= 1.9x one), by the command's wall time (start-up and the wait for
# evaluations in flight after the budget included) and per GPU-hour; the ratio by budget alone is
# kept beside it for comparison with older figures. Each run searches the same targets for the same budget with its own
# output folder and its own cache (so neither starts with the other's compiles and references),
# a patience too large to converge, and the evaluations counted from its results.jsonl. Run as one
# background job on a machine with two GPUs (nvidia-h200-x2):
#   setsid bench/gpu_scaling.sh KILN_TARBALL OUTDIR > /dev/null 2>&1 &
# Options (environment): SCALING_TARGETS (default: all nine), SCALING_BUDGET (default 3m).
# Writes OUTDIR/progress.log, OUTDIR/scaling.json and OUTDIR/DONE.
set -uo pipefail
tarball=${1:?usage: bench/gpu_scaling.sh KILN_TARBALL OUTDIR}
out=${2:?usage: bench/gpu_scaling.sh KILN_TARBALL OUTDIR}
mkdir -p "$out"
log() { echo "[$(date -u +%H:%M:%S)] $*" | tee -a "$out/progress.log" >&2; }
unpacked=$(mktemp -d /tmp/kiln-scaling.XXXXXX)
tar -C "$unpacked" -xzf "$tarball" || { log "cannot unpack $tarball"; exit 2; }
kiln=$(ls -d "$unpacked"/kiln-*/ | head -1)/bin/kiln
targets=${SCALING_TARGETS:-rmsnorm,softmax,cross_entropy,reduce,layernorm,rotary_embedding,matmul,flash_attention,fused_mlp}
budget=${SCALING_BUDGET:-3m}
log "bundle: $("$kiln" version 2>&1 | head -1)"
nvidia-smi -L >> "$out/progress.log" 2>&1
for gpus in 0 0,1; do
  name=gpus-${gpus//,/_}
  log "kiln run --gpus $gpus --budget $budget: start"
  start=$(date +%s)
  timeout 900 "$kiln" run --targets "$targets" --gpus "$gpus" --budget "$budget" --patience 100000 \
    --out "$out/$name" --cache-dir "/tmp/kiln-scaling-cache-$name" > "$out/$name.stdout" 2> "$out/$name.stderr"
  rc=$?
  end=$(date +%s)
  rm -f "$out/$name"/redis/*.rdb "$out/$name"/redis/appendonly* 2> /dev/null
  echo "$((end - start))" > "$out/$name.wall_s"
  log "kiln run --gpus $gpus: rc=$rc, $(wc -l < "$out/$name/results.jsonl") results in $((end - start)) s of wall time"
done
python3 - "$out" "$budget" > "$out/scaling.json" <<'PY'
import json, sys, pathlib
out, budget = pathlib.Path(sys.argv[1]), sys.argv[2]
seconds = float(budget[:-1]) * {"s": 1, "m": 60, "h": 3600}[budget[-1]]
rows = {}
for name, gpus in (("gpus-0", 1), ("gpus-0_1", 2)):
    results = [json.loads(l) for l in open(out / name / "results.jsonl")]
    wall = float(open(out / f"{name}.wall_s").read())
    full = [r for r in results if not r.get("timing", {}).get("stopped_early")]
    rows[name] = {"results": len(results),
                  "verified": sum(r.get("outcome") == "verified" for r in results),
                  "timed_in_full": len(full),
                  "wall_s": wall,
                  # By the command's wall time (start-up and the drain after the budget count),
                  # per GPU: what a GPU-hour of the farm buys.
                  "per_gpu_hour_wall": len(results) / wall * 3600 / gpus,
                  "per_hour_budget": len(results) / seconds * 3600}
rows["budget_s"] = seconds
# Two GPUs against one: evaluations per wall-clock hour (the goal: >= 1.9x), and per GPU-hour.
rows["ratio_wall"] = (rows["gpus-0_1"]["results"] / rows["gpus-0_1"]["wall_s"]) / \
    max(rows["gpus-0"]["results"] / rows["gpus-0"]["wall_s"], 1e-9)
rows["ratio_budget"] = rows["gpus-0_1"]["per_hour_budget"] / max(rows["gpus-0"]["per_hour_budget"], 1e-9)
print(json.dumps(rows, indent=2))
PY
log "scaling: $(tr -d '\n ' < "$out/scaling.json")"
touch "$out/DONE"
