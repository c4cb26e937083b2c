#!/usr/bin/env bash
set -u
mkdir -p /tmp/kb && tar -C /tmp/kb -xzf .carry/kiln-0.1.0-x86_64.tar.gz
k=$(ls -d /tmp/kb/kiln-*/)bin/kiln
CACHE_DIR=/tmp/mm-cache timeout 560 bench/matmul_compare.sh $k bench/cases/step13-h200-carryover.txt /tmp/mm > /tmp/mm.log 2>&1
echo rc=$?
mkdir -p $OUT/mm; cp /tmp/mm/results.jsonl /tmp/mm/table.md $OUT/mm/; tar -C /tmp/mm -czf $OUT/mm/pytorch.tgz $(cd /tmp/mm && ls pytorch-*.json)
cat /tmp/mm/table.md
