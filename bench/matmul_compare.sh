#!/usr/bin/env bash
# matmul configurations against cuBLAS in one lease: for each line "SHAPE|PARAMS" of CASES,
# `kiln eval` (static scan, compile, all five verification stages, then the timing with L2
# flushed) of that configuration at that shape, after PyTorch's matmul (cuBLAS) at every shape
# with kiln's timing method (bench/pytorch_baselines.py --no-compile). Lines starting with # are
# skipped. Run on the GPU machine from the repository root:
#   bench/matmul_compare.sh KILN CASES OUT
# OUT gets results.jsonl (one line per evaluation, bench/eval_record.py), pytorch-*.json and
# table.md (µs, cuBLAS µs, kiln / cuBLAS as cuBLAS time over kiln time: above 1 kiln is faster).
# CACHE_DIR moves kiln's compile cache out of OUT (default OUT/cache).
set -uo pipefail
kiln=${1:?usage: bench/matmul_compare.sh KILN CASES OUT}
cases=${2:?usage: bench/matmul_compare.sh KILN CASES OUT}
out=${3:?usage: bench/matmul_compare.sh KILN CASES OUT}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
: > "$out/results.jsonl"
grep -v '^\s*\(#\|$\)' "$cases" > "$out/cases.txt"
for shape in $(cut -d'|' -f1 "$out/cases.txt" | sort -u); do
  stem=${shape//[=,]/_}
  python3 "$here/pytorch_baselines.py" --targets matmul --shape "$shape" --no-compile \
    --out "$out/pytorch-$stem.json" > "$out/pytorch-$stem.log" 2>&1
done
while IFS='|' read -r shape params; do
  "$kiln" eval matmul --params "$params" --shape "$shape" --json --cache-dir "${CACHE_DIR:-$out/cache}" \
    > "$out/eval.json" 2> "$out/eval.stderr"
  python3 "$here/eval_record.py" "$out/eval.json" "$shape" "$params" >> "$out/results.jsonl"
  tail -n 1 "$out/results.jsonl" | cut -c1-240
done < "$out/cases.txt"
python3 - "$out" "$here" <<'PY' > "$out/table.md"
import json, os, sys
out = sys.argv[1]
sys.path.insert(0, sys.argv[2])
from baseline_clock import shown, timing, warning
rows = [json.loads(l) for l in open(os.path.join(out, "results.jsonl"))]
def cublas_timing(shape):
    p = os.path.join(out, "pytorch-%s.json" % shape.replace("=", "_").replace(",", "_"))
    return timing(p, "matmul", "eager")
def cublas(shape):
    return cublas_timing(shape)[0]
f = lambda v: "%.1f" % v if v else "-"
w = warning({"cuBLAS at " + s: cublas_timing(s) for s in sorted({r["shape"] for r in rows})}, rows)
if w:
    print(w)
    print()
print("| shape | configuration | outcome | kiln µs | SM MHz | cuBLAS | kiln / cuBLAS |")
print("|---|---|---|---|---|---|---|")
for r in rows:
    t = r["median_us"] if r["outcome"] == "verified" else None
    e = cublas(r["shape"])
    short = ",".join(p for p in r["params"].split(",") if p.split("=")[0] in
                     ("BM", "BN", "STAGES", "GROUP_M", "CL", "PERS", "SK", "TMA"))
    print("| %s | %s | %s | %s | %s | %s | %s |" % (
        r["shape"], short, r["outcome"], f(t), r.get("sm_clock_mhz") or "-",
        shown(cublas_timing(r["shape"])), "%.2fx" % (e / t) if e and t else "-"))
# The fastest verified configuration of each shape: what a search over these cases would keep.
print()
print("| shape | fastest configuration | kiln µs | cuBLAS µs | kiln / cuBLAS |")
print("|---|---|---|---|---|")
for shape in sorted({r["shape"] for r in rows}):
    ok = [r for r in rows if r["shape"] == shape and r["outcome"] == "verified" and r["median_us"]]
    e = cublas(shape)
    if not ok:
        print("| %s | none verified | - | %s | - |" % (shape, f(e)))
        continue
    b = min(ok, key=lambda r: r["median_us"])
    print("| %s | %s | %s | %s | %s |" % (shape, b["params"], f(b["median_us"]), f(e),
                                          "%.2fx" % (e / b["median_us"]) if e else "-"))
PY
cat "$out/table.md"
