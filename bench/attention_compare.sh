#!/usr/bin/env bash
# flash_attention's structural variants against PyTorch's SDPA, in one lease: `kiln eval` (all
# five verification stages, then the timing) of IMPL 1 (two wgmma warpgroups, cp.async loads by
# every thread) and of IMPL 2 (the FlashAttention-3 structure: TMA producer warpgroup, K/V
# mbarriers, setmaxnreg; PING 1 ping-pong, PERS 1 persistent longest-first tiles) in f16 and
# bf16, then PyTorch (SDPA, which picks its fastest backend: cuDNN or flash) timed with kiln's
# method at the same shape. Run on the GPU machine from the repository root:
#   bench/attention_compare.sh KILN OUT [SHAPE]
# SHAPE defaults to the benchmark shape (B=1,H=32,L=2048,D=128,MASK=2). ATTN_CASES overrides the
# configurations (space-separated). OUT gets results.jsonl and table.md.
set -uo pipefail
kiln=${1:?usage: bench/attention_compare.sh KILN OUT [SHAPE]}
out=${2:?usage: bench/attention_compare.sh KILN OUT [SHAPE]}
shape=${3:-B=1,H=32,L=2048,D=128,MASK=2}
here=$(cd "$(dirname "$0")" && pwd)
repo=$(dirname "$here")
mkdir -p "$out"
: > "$out/results.jsonl"
base="RM=1,STAGES=2,WARPS=8"
cases=${ATTN_CASES:-"IMPL=1,PIPE=0,BN=128 IMPL=2,PIPE=1,BN=128,PING=0,PERS=0 IMPL=2,PIPE=1,BN=128,PING=1,PERS=0 IMPL=2,PIPE=1,BN=128,PING=0,PERS=1 IMPL=2,PIPE=1,BN=128,PING=1,PERS=1"}
for dtype in f16 bf16; do
  for c in $cases; do
    params="$base,$c"
    "$kiln" eval flash_attention --targets-dir "$repo/targets" --params "$params" --shape "$shape" \
      --dtype "$dtype" --json --cache-dir "$out/cache" > "$out/eval.json" 2> "$out/eval.stderr"
    python3 "$here/eval_record.py" "$out/eval.json" "$shape,dtype=$dtype" "$params" >> "$out/results.jsonl"
    tail -n 1 "$out/results.jsonl" | cut -c1-200
  done
done
for dtype in f16 bf16; do
  python3 "$here/pytorch_baselines.py" --targets flash_attention --shape "$shape" --dtype "$dtype" \
    --no-compile --out "$out/pytorch-$dtype.json" > "$out/pytorch-$dtype.log" 2>&1
done
python3 - "$out" "$here" <<'PY' > "$out/table.md"
import json, os, sys
out = sys.argv[1]
sys.path.insert(0, sys.argv[2])
from baseline_clock import shown, timing, warning
rows = [json.loads(l) for l in open(os.path.join(out, "results.jsonl"))]
sdpa_timings = {"SDPA " + d: timing(os.path.join(out, "pytorch-%s.json" % d), "flash_attention", "eager")
                for d in ("f16", "bf16")}
w = warning(sdpa_timings, rows)
if w:
    print(w)
    print()
def sdpa(dtype):
    try:
        r = json.load(open(os.path.join(out, "pytorch-%s.json" % dtype)))
        e = r["targets"]["flash_attention"]["impls"]["eager"]
        return e["timing"]["median_us"], e.get("sdpa_backend", "?")
    except Exception:
        return None, "?"
print("| dtype | configuration | verdict | kiln µs | SDPA (backend) | SDPA / kiln |")
print("|---|---|---|---|---|---|")
for r in rows:
    dtype = r["shape"].split("dtype=")[1]
    s, backend = sdpa(dtype)
    k = r["median_us"] if r["outcome"] == "verified" else None
    short = ",".join(p for p in r["params"].split(",") if p.split("=")[0] in ("IMPL", "PIPE", "PING", "PERS", "STAGES"))
    f = lambda v: "%.1f" % v if v else "-"
    ratio = "%.3fx" % (s / k) if s and k else "-"
    print("| %s | %s | %s | %s | %s (%s) | %s |" % (dtype, short, r["outcome"], f(k),
                                                   shown(sdpa_timings["SDPA " + dtype]), backend, ratio))
PY
cat "$out/table.md"
