#!/usr/bin/env bash
# PERS 3 beside the carried-over configuration at each of step 13's real-layer shapes.
set -u
mkdir -p /tmp/kb && tar -C /tmp/kb -xzf .carry/kiln-0.1.0-x86_64.tar.gz
b=$(ls -d /tmp/kb/kiln-*/)
CACHE_DIR=/tmp/mm-cache timeout 560 bench/matmul_compare.sh $b/bin/kiln bench/cases/step13-pingpong-shapes.txt /tmp/mm > /tmp/mm.log 2>&1
echo rc=$?
mkdir -p $OUT/mm; cp /tmp/mm/results.jsonl /tmp/mm/table.md /tmp/mm.log $OUT/mm/ 2>/dev/null
cat /tmp/mm/table.md
