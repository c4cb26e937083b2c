# The best configuration of each built-in target on an H100, as `kiln run` crowned them
# (bench/results/2026-11-24-H100-kiln-run-nine-targets.md) and the hardening re-verified them
# (bench/results/2026-11-24-H100-step7-hardening.md); matmul: PERS 2 from
# bench/results/2026-11-25-H100-step13-tma-store.md; flash_attention: the FA3 variant from
# bench/results/2026-11-28-H200-fa3.md (kiln run crowned it on the H200); fused_mlp: HTMA 1 from
# bench/results/2026-11-29-H200-step13-htma.md (kiln run crowned it on the H200). Sourced by the
# lease scripts: ${best[T]}.
# shellcheck disable=SC2034
declare -A best=(
  [rmsnorm]="BLOCK=512,ELEMS=16,HINT=0,ROWS=1,WREG=0"
  [softmax]="BLOCK=512,ELEMS=16,HINT=0,ROWS=1"
  [reduce]="BLOCK=256,CHUNK=8192,GRID=0,HINT=3,STAGES=4,TMA=0,TPR=256,UNROLL=2"
  [layernorm]="G=0,HINT=0,ITEMS=4,OCC=0,RPB=1,TPR=128,VB=16"
  [rotary_embedding]="BLOCK=128,HINT=0,HT=2,MINB=0,TX=8,UNR=2,VB=16"
  [cross_entropy]="BLOCK=1024,OCC=1,UNROLL=2"
  [matmul]="BK=64,BM=128,BN=256,CL=0,GROUP_M=16,IMPL=1,PERS=2,SK=1,STAGES=4,TMA=1,WM=1,WN=1"
  [flash_attention]="BN=128,IMPL=2,PERS=1,PIPE=1,PING=1,RM=1,STAGES=2,WARPS=8"
  [fused_mlp]="ARCH=2,BN=256,GRID=132,HTMA=1,NG=1,STAGES=4,TMA=1,WG=2,WIDE=1"
)
