#!/usr/bin/env bash
# PERS 3's GPU tests and the other TMA ones (whose code it shares), then a matmul_compare case file.
set -u
mkdir -p /tmp/kb && tar -C /tmp/kb -xzf .carry/kiln-0.1.0-x86_64.tar.gz
b=$(ls -d /tmp/kb/kiln-*/)
export KILN_BIN=$b/bin/kiln KILN_CACHE_DIR=/tmp/kiln-cache KILN_SOURCE_DIR=$b/source
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw --format=csv
for t in $($b/tests/kiln_gpu_tests --gtest_list_tests --gtest_filter='*MatmulPingPong*:*MatmulTmaStore*:*MatmulTmaMulticast*' | awk '/^[^ ]/ {s=$1} /^  / {print s $1}'); do
  if timeout 120 $b/tests/kiln_gpu_tests --gtest_filter="$t" >> $OUT/gpu_tests.txt 2>&1; then echo "PASS $t"; else echo "FAIL $t"; fi
done
CACHE_DIR=/tmp/mm-cache timeout ${CMP_S:-300} bench/matmul_compare.sh $b/bin/kiln ${CASES:-bench/cases/step13-pingpong-clusters.txt} /tmp/mm > /tmp/mm.log 2>&1
echo rc=$?
mkdir -p $OUT/mm; cp /tmp/mm/results.jsonl /tmp/mm/table.md /tmp/mm.log $OUT/mm/ 2>/dev/null
cat /tmp/mm/table.md
