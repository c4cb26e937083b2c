#!/usr/bin/env bash
# Split-K on matmul at few tokens: for each shape, `kiln eval` (all five verification stages, then
# the timing) of the wgmma template at 128 x 128 and 128 x 256 tiles with SK = 1, 2, 4 and 8, and
# PyTorch (cuBLAS) at the same shape with kiln's timing method, in one lease. Run on the GPU
# machine from the repository root:
#   bench/splitk_compare.sh KILN OUT [SHAPE ...]     (default shapes: the 128-token GEMMs of a
#                                                     Llama-3-8B layer and the 1024-token down
#                                                     projection)
# OUT gets results.jsonl (one line per evaluation: shape, params, outcome, median_us, the SM clock),
# pytorch-<shape>.json, and table.md (us per configuration, the best SK against SK 1 and cuBLAS).
set -uo pipefail
kiln=${1:?usage: bench/splitk_compare.sh KILN OUT [SHAPE ...]}
out=${2:?usage: bench/splitk_compare.sh KILN OUT [SHAPE ...]}
shift 2
shapes=("$@")
if [[ ${#shapes[@]} -eq 0 ]]; then
  shapes=(M=128,N=1024,K=4096 M=128,N=4096,K=4096 M=128,N=6144,K=4096 M=128,N=4096,K=14336
          M=128,N=28672,K=4096 M=1024,N=4096,K=14336)
fi
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
: > "$out/results.jsonl"
cache="$out/cache"  # one compile per configuration and dtype, reused at every shape
for s in "${shapes[@]}"; do
  for bn in 128 256; do
    stages=$([[ $bn == 128 ]] && echo 6 || echo 4)
    for sk in 1 2 4 8; do
      params="BK=64,BM=128,BN=$bn,CL=0,GROUP_M=8,IMPL=1,PERS=0,SK=$sk,STAGES=$stages,WM=1,WN=1"
      "$kiln" eval matmul --params "$params" --shape "$s" --json --cache-dir "$cache" \
        > "$out/eval.json" 2> "$out/eval.stderr"
      python3 "$here/eval_record.py" "$out/eval.json" "$s" "$params" >> "$out/results.jsonl"
      tail -n 1 "$out/results.jsonl"
    done
  done
  python3 "$here/pytorch_baselines.py" --targets matmul --shape "$s" --no-compile \
    --out "$out/pytorch-${s//[=,]/_}.json" > "$out/pytorch-${s//[=,]/_}.log" 2>&1
  echo "pytorch $s: $(python3 -c "import json; j=json.load(open('$out/pytorch-${s//[=,]/_}.json'))['targets']['matmul']['impls']; print({k: v['timing']['median_us'] for k, v in j.items() if v.get('status') == 'ok'})" 2>&1)"
done
python3 - "$out" <<'EOF' > "$out/table.md"
import json, os, sys
out = sys.argv[1]
rows = [json.loads(l) for l in open(os.path.join(out, "results.jsonl"))]
shapes = list(dict.fromkeys(r["shape"] for r in rows))
def us(r):
    return r["median_us"] if r["outcome"] == "verified" and r["median_us"] else None
print("| shape | BN | SK 1 | SK 2 | SK 4 | SK 8 | best / SK 1 | cuBLAS (eager) | best / cuBLAS |")
print("|---|---|---|---|---|---|---|---|---|")
for s in shapes:
    try:
        j = json.load(open(os.path.join(out, "pytorch-%s.json" % s.replace("=", "_").replace(",", "_"))))["targets"]["matmul"]["impls"]
        eager = j["eager"]["timing"]["median_us"]
    except Exception:
        eager = None
    for bn in ("128", "256"):
        t = {}
        for r in rows:
            if r["shape"] == s and ",BN=%s," % bn in r["params"]:
                t[r["params"].split("SK=")[1].split(",")[0]] = us(r)
        cells = ["%.1f" % t[k] if t.get(k) else "-" for k in ("1", "2", "4", "8")]
        ok = [v for v in t.values() if v]
        best = min(ok) if ok else None
        gain = "%.2fx" % (t["1"] / best) if best and t.get("1") else "-"
        vs = "%.2fx" % (eager / best) if best and eager else "-"
        print("| %s | %s | %s | %s | %s | %s |" % (s, bn, " | ".join(cells), gain,
                                                  "%.1f" % eager if eager else "-", vs))
EOF
cat "$out/table.md"
