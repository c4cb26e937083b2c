#!/usr/bin/env bash
# Step-2 evaluator benchmarks, run on a GPU machine over an unpacked bundle:
#  1. evaluation rate: `kiln eval rmsnorm --sweep --limit N` at the 8192x8192 f16 benchmark shape
#     (one sandbox, compiles prefetched on a pool) -- evaluations per GPU-hour and the wall time
#     of each evaluation split into load / verify / time;
#  2. timing repeatability: the same kernel timed in 5 separate `kiln eval` processes; the spread
#     (max - min) / min of their medians.
# Usage: bench/eval_rate_and_repeatability.sh KILN_BINARY [sweep_limit]
set -uo pipefail
kiln=${1:?usage: $0 KILN_BINARY [sweep_limit]}
limit=${2:-24}
out=${OUT:-$PWD/bench-out}
mkdir -p "$out"

echo "=== evaluation rate: rmsnorm template sweep (limit $limit)"
"$kiln" eval rmsnorm --sweep --limit "$limit" 2>&1 | tee "$out/sweep_rmsnorm.txt"

repeat() {
  local label=$1; shift
  echo "=== repeatability: $label, 5 separate processes"
  : > "$out/repeat_$label.txt"
  for i in 1 2 3 4 5; do
    "$kiln" eval "$@" --json 2>/dev/null |
      python3 -c 'import json,sys; r=json.load(sys.stdin); print(r["outcome"], r["timing"]["median_us"], r["timing"]["noise_rel"], r["timing"]["samples"])' |
      tee -a "$out/repeat_$label.txt"
  done
  python3 - "$out/repeat_$label.txt" <<'PY'
import sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
med = [float(r[1]) for r in rows if r[0] == "verified"]
if len(med) == 5:
    print(f"medians us: {' '.join(f'{m:.2f}' for m in med)}; spread (max-min)/min = {100*(max(med)-min(med))/min(med):.2f}%")
else:
    print("not all runs verified:", rows)
PY
}
repeat rmsnorm_template rmsnorm --params BLOCK=512,VEC=8
repeat reduce_template reduce --params BLOCK=256,VEC=8,ROWS=1
repeat rmsnorm_seed rmsnorm
