#!/usr/bin/env bash
# matmul's and fused_mlp's best configurations against cuBLAS under ncu (bench/gemm_ncu.sh).
set -u
timeout 560 bench/gemm_ncu.sh .carry/kiln-0.1.0-x86_64.tar.gz /tmp/ncu > /tmp/ncu.log 2>&1
echo rc=$?
cat /tmp/ncu.log | tail -20
cd /tmp/ncu && tar -czf $OUT/ncu.tgz . && ls -la
for f in ncu-*.csv; do echo "== $f"; cut -c1-400 $f | head -8; done
