#!/usr/bin/env bash
# The timeline of one fused_mlp launch (the persistent ARCH 2 kernel) on a GPU machine: where its
# blocks work, wait for the ring or for rows of h, and idle at the end. `kiln export` writes the
# configuration as CUDA (verified on this GPU first); nvcc builds it into
# bench/fused_mlp_trace/trace_main.cu, which fills the kernel's timeline hooks (empty in every
# kernel kiln builds); REPS launches are traced with L2 flushed before each; and
# bench/fused_mlp_trace_summary.py splits the time. Run from the repository root:
#   bench/fused_mlp_trace.sh KILN OUT [PARAMS] [SHAPE]
# PARAMS default to the HTMA 1 best (bench/best_configs.sh), SHAPE to the benchmark shape.
# OUT gets export/, trace.csv, launches.txt (each launch's time) and summary.md. Env: REPS
# (default 3), NVCC (default nvcc on PATH, else /usr/local/cuda/bin/nvcc).
set -euo pipefail
kiln=${1:?usage: bench/fused_mlp_trace.sh KILN OUT [PARAMS] [SHAPE]}
out=${2:?usage: bench/fused_mlp_trace.sh KILN OUT [PARAMS] [SHAPE]}
params=${3:-ARCH=2,BN=256,GRID=132,HTMA=1,NG=1,STAGES=4,TMA=1,WG=2,WIDE=1}
shape=${4:-M=2048,D=4096,H=11008}
here=$(cd "$(dirname "$0")" && pwd)
nvcc=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
mkdir -p "$out"
eval "$(tr ',' '\n' <<< "$shape" | grep -E '^[MDH]=[0-9]+$' | sed 's/^/dim_/')"
: "${dim_M:?SHAPE needs M}" "${dim_D:?SHAPE needs D}" "${dim_H:?SHAPE needs H}"
rm -rf "$out/export"
"$kiln" export fused_mlp --template --params "$params" --format cuda --to "$out/export" \
  > "$out/export.log" 2>&1 || { cat "$out/export.log"; exit 1; }
"$nvcc" -O3 -std=c++17 -gencode arch=compute_90a,code=sm_90a -I "$out/export" \
  "$here/fused_mlp_trace/trace_main.cu" -o "$out/trace_main"
"$out/trace_main" "$dim_M" "$dim_D" "$dim_H" "${REPS:-3}" "$out/trace.csv" | tee "$out/launches.txt"
python3 "$here/fused_mlp_trace_summary.py" "$out/trace.csv" "$dim_M" "$dim_D" "$dim_H" \
  | tee "$out/summary.md"
