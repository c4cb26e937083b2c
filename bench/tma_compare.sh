#!/usr/bin/env bash
# TMA loads against cp.async loads in matmul's wgmma variant: at each shape, `kiln eval` (all five
# verification stages, then the timing) of configurations that differ only in TMA (0: 128
# producer threads with cp.async; 1: one thread issuing TMA boxes), and PyTorch (cuBLAS) at the
# same shape with kiln's timing method, in one lease. Run on the GPU machine from the repository
# root:
#   bench/tma_compare.sh KILN OUT
# OUT gets results.jsonl (one line per evaluation) and table.md.
set -uo pipefail
kiln=${1:?usage: bench/tma_compare.sh KILN OUT}
out=${2:?usage: bench/tma_compare.sh KILN OUT}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
: > "$out/results.jsonl"
# shape | configuration without TMA (the bests of the converged and split-K sweeps)
cases=(
  "M=4096,N=4096,K=4096|BK=64,BM=128,BN=256,CL=0,GROUP_M=8,IMPL=1,PERS=0,SK=1,STAGES=4,WM=1,WN=1"
  "M=4096,N=4096,K=4096|BK=64,BM=128,BN=256,CL=0,GROUP_M=8,IMPL=1,PERS=1,SK=1,STAGES=4,WM=1,WN=1"
  "M=4096,N=28672,K=4096|BK=64,BM=128,BN=256,CL=0,GROUP_M=8,IMPL=1,PERS=0,SK=1,STAGES=4,WM=1,WN=1"
  "M=1024,N=4096,K=14336|BK=64,BM=128,BN=256,CL=0,GROUP_M=4,IMPL=1,PERS=0,SK=1,STAGES=4,WM=1,WN=1"
  "M=128,N=4096,K=14336|BK=64,BM=128,BN=256,CL=0,GROUP_M=16,IMPL=1,PERS=0,SK=4,STAGES=4,WM=1,WN=1"
  "M=128,N=4096,K=4096|BK=64,BM=128,BN=128,CL=0,GROUP_M=4,IMPL=1,PERS=0,SK=2,STAGES=6,WM=1,WN=1"
)
cache="$out/cache"
for c in "${cases[@]}"; do
  shape=${c%%|*} base=${c#*|}
  for tma in 0 1; do
    params="$base,TMA=$tma"
    "$kiln" eval matmul --params "$params" --shape "$shape" --json --cache-dir "$cache" \
      > "$out/eval.json" 2> "$out/eval.stderr"
    python3 "$here/eval_record.py" "$out/eval.json" "$shape" "$params" >> "$out/results.jsonl"
    tail -n 1 "$out/results.jsonl"
  done
done
for shape in $(printf '%s\n' "${cases[@]}" | cut -d'|' -f1 | sort -u); do
  stem=${shape//[=,]/_}
  python3 "$here/pytorch_baselines.py" --targets matmul --shape "$shape" --no-compile \
    --out "$out/pytorch-$stem.json" > "$out/pytorch-$stem.log" 2>&1
done
python3 - "$out" <<'EOF' > "$out/table.md"
import json, os, sys
out = sys.argv[1]
rows = [json.loads(l) for l in open(os.path.join(out, "results.jsonl"))]
def us(r):
    return r["median_us"] if r["outcome"] == "verified" and r["median_us"] else None
def eager(shape):
    try:
        p = os.path.join(out, "pytorch-%s.json" % shape.replace("=", "_").replace(",", "_"))
        return json.load(open(p))["targets"]["matmul"]["impls"]["eager"]["timing"]["median_us"]
    except Exception:
        return None
print("| shape | configuration | cp.async µs | TMA µs | TMA gain | cuBLAS µs | TMA / cuBLAS |")
print("|---|---|---|---|---|---|---|")
for i in range(0, len(rows) - 1, 2):
    a, b = rows[i], rows[i + 1]
    ta, tb, e = us(a), us(b), eager(a["shape"])
    short = ",".join(p for p in a["params"].split(",") if p.split("=")[0] in
                     ("BN", "STAGES", "GROUP_M", "PERS", "SK"))
    f = lambda v: "%.1f" % v if v else "-"
    print("| %s | %s | %s | %s | %s | %s | %s |" % (
        a["shape"], short, f(ta), f(tb), "%.3fx" % (ta / tb) if ta and tb else "-", f(e),
        "%.2fx" % (e / tb) if e and tb else "-"))
EOF
cat "$out/table.md"
