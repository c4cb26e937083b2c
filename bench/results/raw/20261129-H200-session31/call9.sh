#!/usr/bin/env bash
set -u
mkdir -p /tmp/kb && tar -C /tmp/kb -xzf .carry/kiln-0.1.0-x86_64.tar.gz
k=$(ls -d /tmp/kb/kiln-*/)bin/kiln
$k version | head -2
timeout 150 $k run --backend cuda --targets rmsnorm --budget 60s --out /tmp/r9 > $OUT/run.log 2>&1
echo "run rc=$?"
grep -E "converged|best|evaluator|WARN|error" $OUT/run.log | tail -8
$k status --out /tmp/r9 2>&1 | head -12
