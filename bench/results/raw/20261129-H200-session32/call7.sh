#!/usr/bin/env bash
# PERS 4 at 4096^3 under ncu (kiln's side only: DRAM and L2 bytes, SM activity), then PERS 4
# against PERS 2 at a shape whose second wave holds 12 of 144 tiles.
set -u
GEMM_NCU_TARGETS=matmul GEMM_NCU_SIDES=kiln \
  GEMM_NCU_PARAMS=BK=64,BM=128,BN=256,CL=0,GROUP_M=8,IMPL=1,PERS=4,SK=1,STAGES=4,TMA=1,WM=1,WN=1 \
  timeout 130 bench/gemm_ncu.sh .carry/kiln-0.1.0-x86_64.tar.gz /tmp/ncu > /tmp/ncu.log 2>&1
echo ncu rc=$?
mkdir -p $OUT/ncu && cp /tmp/ncu/ncu-*.csv /tmp/ncu/progress.log $OUT/ncu/
python3 bench/gemm_ncu_summary.py /tmp/ncu
mkdir -p /tmp/kb && tar -C /tmp/kb -xzf .carry/kiln-0.1.0-x86_64.tar.gz
b=$(ls -d /tmp/kb/kiln-*/)
CACHE_DIR=/tmp/mm-cache timeout 70 bench/matmul_compare.sh $b/bin/kiln bench/cases/step13-streamk-144.txt /tmp/mm > /tmp/mm.log 2>&1
echo rc=$?
mkdir -p $OUT/mm; cp /tmp/mm/results.jsonl /tmp/mm/table.md $OUT/mm/ 2>/dev/null
cat /tmp/mm/table.md
