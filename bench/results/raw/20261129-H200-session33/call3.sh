#!/usr/bin/env bash
# The GPU suite (scripts/gpu_check: version, selftest, every GPU-labelled test in its own process)
# at e828140 (binaries built at ba4aaba: no C++ outside targets/ changed between them).
set -u
timeout 585 scripts/gpu_check .carry/kiln-0.1.0-x86_64.tar.gz > $OUT/gpu_check.log 2>&1
echo rc=$?
grep -c "^PASS" $OUT/gpu_check.log; grep "^FAIL\|NOT RUN\|gpu_check:" $OUT/gpu_check.log
