#!/usr/bin/env bash
# fused_mlp configurations against PyTorch in one lease, at the benchmark shape (or SHAPE):
#  - PyTorch eager, torch.compile default and max-autotune-no-cudagraphs of the SwiGLU MLP
#    (bench/pytorch_baselines.py, kiln's timing method: L2 flushed, medians);
#  - cuBLAS alone on the MLP's two GEMMs (gate and up as one M x 2H x D product, then the down
#    projection M x D x H): the floor the issue's moonshot measures against;
#  - `kiln eval fused_mlp` (static scan, compile, all five verification stages, then the timing)
#    of each line of CASES (a parameter list; lines starting with # are skipped).
# Run on the GPU machine from the repository root:
#   bench/fused_mlp_compare.sh KILN CASES OUT [SHAPE]     (SHAPE: M=..,D=..,H=..)
# OUT gets results.jsonl (bench/eval_record.py), pytorch-*.json and table.md. The table gives each
# PyTorch time with its SM clock and warns where one ran below 95% of kiln's clock: a throttled
# baseline (2026-11-29: 1600-1750 MHz against kiln's 1980) flatters kiln. PYTORCH_ARGS adds
# options to the MLP's baselines (e.g. --target-budget-s 200 to bound the torch.compile runs).
# CACHE_DIR moves kiln's compile cache out of OUT (default OUT/cache), e.g. so that a device call
# returns OUT's few result files and not the cache's many.
set -uo pipefail
kiln=${1:?usage: bench/fused_mlp_compare.sh KILN CASES OUT [SHAPE]}
cases=${2:?usage: bench/fused_mlp_compare.sh KILN CASES OUT [SHAPE]}
out=${3:?usage: bench/fused_mlp_compare.sh KILN CASES OUT [SHAPE]}
shape=${4:-M=2048,D=4096,H=11008}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
: > "$out/results.jsonl"
eval "$(tr ',' '\n' <<< "$shape" | sed 's/^/dim_/')"
# shellcheck disable=SC2086
python3 "$here/pytorch_baselines.py" --targets fused_mlp --shape "$shape" ${PYTORCH_ARGS:-} \
  --out "$out/pytorch-mlp.json" > "$out/pytorch-mlp.log" 2>&1
python3 "$here/pytorch_baselines.py" --targets matmul --no-compile \
  --shape "M=$dim_M,N=$((2 * dim_H)),K=$dim_D" --out "$out/pytorch-gemm1.json" \
  > "$out/pytorch-gemm1.log" 2>&1
python3 "$here/pytorch_baselines.py" --targets matmul --no-compile \
  --shape "M=$dim_M,N=$dim_D,K=$dim_H" --out "$out/pytorch-gemm2.json" \
  > "$out/pytorch-gemm2.log" 2>&1
grep -v '^\s*\(#\|$\)' "$cases" | while read -r params; do
  "$kiln" eval fused_mlp --params "$params" --shape "$shape" --json --cache-dir "${CACHE_DIR:-$out/cache}" \
    > "$out/eval.json" 2> "$out/eval.stderr"
  python3 "$here/eval_record.py" "$out/eval.json" "$shape" "$params" >> "$out/results.jsonl"
  tail -n 1 "$out/results.jsonl" | cut -c1-240
done
python3 - "$out" "$here" <<'PY' > "$out/table.md"
import json, os, sys
out = sys.argv[1]
sys.path.insert(0, sys.argv[2])
from baseline_clock import shown, timing, warning
f = lambda v: "%.1f" % v if v else "-"
mlp = os.path.join(out, "pytorch-mlp.json")
runs = {"eager": timing(mlp, "fused_mlp", "eager"),
        "torch.compile": timing(mlp, "fused_mlp", "torch.compile default"),
        "max-autotune": timing(mlp, "fused_mlp", "torch.compile max-autotune-no-cudagraphs")}
gt1 = timing(os.path.join(out, "pytorch-gemm1.json"), "matmul", "eager")
gt2 = timing(os.path.join(out, "pytorch-gemm2.json"), "matmul", "eager")
g1, g2 = gt1[0], gt2[0]
gemms = g1 + g2 if g1 and g2 else None
records = [json.loads(line) for line in open(os.path.join(out, "results.jsonl"))]
print("PyTorch: eager %s, torch.compile %s, max-autotune %s; cuBLAS on the two GEMMs alone: "
      "%s + %s = %s µs" % (shown(runs["eager"]), shown(runs["torch.compile"]),
                           shown(runs["max-autotune"]), shown(gt1), shown(gt2), f(gemms)))
w = warning(dict(runs, **{"gate/up GEMM": gt1, "down GEMM": gt2}), records)
if w:
    print()
    print(w)
print()
best = min([v[0] for v in runs.values() if v[0]] or [0]) or None
print("| configuration | outcome | kiln µs | SM MHz | kiln / best PyTorch | kiln / two GEMMs |")
print("|---|---|---|---|---|---|")
for r in records:
    t = r["median_us"] if r["outcome"] == "verified" else None
    print("| %s | %s | %s | %s | %s | %s |" % (
        r["params"], r["outcome"], f(t), r.get("sm_clock_mhz") or "-",
        "%.3f" % (t / best) if t and best else "-", "%.3f" % (t / gemms) if t and gemms else "-"))
PY
cat "$out/table.md"
