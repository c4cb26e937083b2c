#!/usr/bin/env bash
# kiln's GEMMs and cuBLAS's under Nsight Compute, side by side: for matmul (4096^3) and fused_mlp
# (2048 x 4096 x 11008), `kiln export --format torch` of bench/best_configs.sh's configuration, then
# bench/gemm_ncu.py under ncu (clocks left alone: --clock-control none), once for kiln's launches
# and once for PyTorch eager's (cuBLAS). Per kernel: duration, SM clock, tensor-pipe and SM
# throughput, L2 and DRAM traffic, and how evenly the SMs were busy (sm__cycles_active min / avg /
# max: a persistent kernel whose tiles do not divide evenly over the SMs shows a low min).
#   bench/gemm_ncu.sh TARBALL OUTDIR
# Env: GEMM_NCU_TARGETS (default matmul,fused_mlp), GEMM_NCU_PARAMS (one target's parameters
# instead of best_configs.sh's), GEMM_NCU_SIDES (default "kiln eager").
set -uo pipefail
tarball=${1:?usage: bench/gemm_ncu.sh TARBALL OUTDIR}
out=${2:?usage: bench/gemm_ncu.sh TARBALL OUTDIR}
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
mkdir -p "$out"
out=$(cd "$out" && pwd)
source "$repo/bench/torch_exports.sh"
source "$repo/bench/best_configs.sh"
unpack_bundle "$tarball" kiln-gemm-ncu || { echo "gemm_ncu: cannot unpack $tarball" >&2; exit 2; }
ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2> /dev/null | head -1)
[[ -n "$ncu" ]] || { echo "gemm_ncu: no ncu on this machine" >&2; exit 2; }
# Metric names differ between ncu versions: keep those this one knows.
"$ncu" --query-metrics --chip gh100 > "$out/metrics-known.txt" 2>&1
metrics=gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second,launch__grid_size,launch__registers_per_thread
for m in sm__throughput.avg.pct_of_peak_sustained_elapsed \
  sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_elapsed \
  sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed \
  sm__cycles_active.min sm__cycles_active.avg sm__cycles_active.max sm__cycles_elapsed.max \
  lts__t_bytes.sum lts__throughput.avg.pct_of_peak_sustained_elapsed dram__bytes.sum \
  l1tex__data_pipe_lsu_wavefronts_mem_shared.sum; do
  base=${m%%.*}
  grep -q "^$base\b" "$out/metrics-known.txt" && metrics+=",$m"
done
echo "metrics: $metrics" | tee "$out/progress.log"
exports=$(mktemp -d /tmp/kiln-gemm-ncu-exports.XXXXXX)
GEMM_NCU_TARGETS=${GEMM_NCU_TARGETS:-matmul,fused_mlp}
for t in ${GEMM_NCU_TARGETS//,/ }; do
  params=${best[$t]}
  [[ -n "${GEMM_NCU_PARAMS:-}" ]] && params=$GEMM_NCU_PARAMS
  export_torch "$t" "$params" "$exports/$t" "$out/export-$t.log" ||
    { echo "export $t failed" | tee -a "$out/progress.log"; continue; }
  build_torch "$exports/$t" "$out/build-$t.log" ||
    { echo "build $t failed" | tee -a "$out/progress.log"; continue; }
  for side in ${GEMM_NCU_SIDES:-kiln eager}; do
    timeout 300 "$ncu" --clock-control none --nvtx --nvtx-include "$side/" --metrics "$metrics" \
      --csv --page raw python3 "$repo/bench/gemm_ncu.py" "$exports/$t" \
      > "$out/ncu-$t-$side.csv" 2> "$out/ncu-$t-$side.log"
    echo "ncu $t $side: rc=$?" | tee -a "$out/progress.log"
  done
done
