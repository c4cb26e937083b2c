#!/usr/bin/env bash
# bench/torch_exports.sh (the bundle unpacking and the torch export and build that gemm_ncu.sh and
# same_call_lease.sh now share): both scripts once, on matmul only.
set -u
GEMM_NCU_TARGETS=matmul GEMM_NCU_SIDES="kiln eager" timeout 250 bench/gemm_ncu.sh .carry/kiln-0.1.0-x86_64.tar.gz /tmp/ncu > /tmp/ncu.log 2>&1
echo "gemm_ncu: rc=$?"; cat /tmp/ncu/progress.log
python3 bench/gemm_ncu_summary.py /tmp/ncu
SAME_CALL_TARGETS=matmul SAME_CALL_ARGS="--rounds 5" timeout 250 bench/same_call_lease.sh .carry/kiln-0.1.0-x86_64.tar.gz /tmp/sc > /tmp/sc.log 2>&1
echo "same_call_lease: rc=$?"; cat /tmp/sc/progress.log; cat /tmp/sc/matmul.md
mkdir -p $OUT/call2; cp /tmp/sc/progress.log /tmp/sc/matmul.md $OUT/call2/ 2>/dev/null
