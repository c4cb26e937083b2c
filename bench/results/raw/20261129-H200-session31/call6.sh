#!/usr/bin/env bash
set -u
mkdir -p /tmp/kb && tar -C /tmp/kb -xzf .carry/kiln-0.1.0-x86_64.tar.gz
b=$(ls -d /tmp/kb/kiln-*/); k=$b/bin/kiln
export PATH="$b/bin:$PATH" TORCH_EXTENSIONS_DIR=/tmp/ext PYTHONUNBUFFERED=1
$k export matmul --template --params BK=64,IMPL=1,WM=1,WN=1,TMA=1,CL=0,SK=1,STAGES=4,BM=128,BN=256,GROUP_M=16,PERS=2 --format torch --to /tmp/e/matmul > /tmp/e1.log 2>&1 || tail -5 /tmp/e1.log
$k export matmul --template --params BK=64,IMPL=1,WM=1,WN=1,TMA=1,CL=0,PERS=0,SK=2,STAGES=5,BM=128,BN=128,GROUP_M=4 --format torch --to /tmp/e2/matmul > /tmp/e2.log 2>&1 || tail -5 /tmp/e2.log
mkdir -p $OUT/mm
python3 bench/same_call_compare.py /tmp/e/matmul --compile none --shape M=4096,N=4096,K=14336 --rounds 16 --per-round 10 --rest-ms 300 --out $OUT/mm/k14336.json
python3 bench/same_call_compare.py /tmp/e2/matmul --compile none --shape M=128,N=6144,K=4096 --rounds 16 --per-round 10 --rest-ms 300 --out $OUT/mm/m128n6144.json
