#!/usr/bin/env bash
# PERS 4 (stream-K tail) against PERS 2, then the GPU tests that touch matmul's template, its
# seeds (Triton's too) and kiln run.
set -u
mkdir -p /tmp/kb && tar -C /tmp/kb -xzf .carry/kiln-0.1.0-x86_64.tar.gz
b=$(ls -d /tmp/kb/kiln-*/)
export KILN_BIN=$b/bin/kiln KILN_CACHE_DIR=/tmp/kiln-cache KILN_SOURCE_DIR=$b/source
CACHE_DIR=/tmp/mm-cache timeout 230 bench/matmul_compare.sh $b/bin/kiln bench/cases/step13-streamk.txt /tmp/mm > /tmp/mm.log 2>&1
echo rc=$?
mkdir -p $OUT/mm; cp /tmp/mm/results.jsonl /tmp/mm/table.md $OUT/mm/ 2>/dev/null
cat /tmp/mm/table.md
end=$((SECONDS + 210))
for t in $($b/tests/kiln_gpu_tests --gtest_list_tests --gtest_filter='*MatmulStreamK*:*MatmulTmaStore*:TritonGpu.*:KilnRunGpu.*:*MatmulSplitK*:*MatmulTmaMulticast*' | awk '/^[^ ]/ {s=$1} /^  / {print s $1}'); do
  left=$((end - SECONDS)); ((left < 10)) && { echo "NOT RUN $t"; continue; }
  if timeout $left $b/tests/kiln_gpu_tests --gtest_filter="$t" >> $OUT/gpu_tests.txt 2>&1; then echo "PASS $t"; else echo "FAIL $t"; fi
done
