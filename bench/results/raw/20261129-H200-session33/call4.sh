#!/usr/bin/env bash
# The GPU suite (scripts/gpu_check) after the reference moved into a forked child per call
# (evaluator/forked_call.h) and the evaluator's input sets and reference outputs into shared pages.
set -u
timeout 585 scripts/gpu_check .carry/kiln-0.1.0-x86_64.tar.gz > $OUT/gpu_check.log 2>&1
echo rc=$?
grep -c "^PASS" $OUT/gpu_check.log; grep "^FAIL\|NOT RUN\|gpu_check:" $OUT/gpu_check.log
