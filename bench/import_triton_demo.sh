#!/usr/bin/env bash
# The two commands of docs/import-triton.md on a GPU machine, end to end: kiln import-triton of
# bench/import_triton_demo/my_kernels.py (its own launcher, real torch tensors on the GPU), the
# reference a user would write copied over the skeleton, kiln targets --check, then kiln run
# --backend triton on the imported target. Output under OUT.
#   bench/import_triton_demo.sh KILN OUT [BUDGET]     (BUDGET: default 90s)
set -uo pipefail
kiln=${1:?usage: bench/import_triton_demo.sh KILN OUT [BUDGET]}
out=${2:?usage: bench/import_triton_demo.sh KILN OUT [BUDGET]}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out/targets"
cd "$here/import_triton_demo" || exit 2
"$kiln" import-triton my_kernels.py --kernel scale_rows --python python3 \
  --out "$out/targets/scale_rows" 2>&1 | tee "$out/import.log" || exit 1
cp reference.cpp "$out/targets/scale_rows/reference.cpp"
"$kiln" targets --check "$out/targets/scale_rows" --backend triton 2>&1 | tail -3 | tee "$out/check.log"
"$kiln" run --targets-dir "$out/targets" --targets scale_rows --backend triton \
  --budget "${3:-90s}" --out "$out/run" > "$out/run.log" 2>&1
echo "kiln run: rc=$?"
sed -n '/^target /,/^$/p' "$out/run.log"
