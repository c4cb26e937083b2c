#!/usr/bin/env bash
set -u
for dt in f16 bf16; do
SAME_CALL_DTYPE=$dt SAME_CALL_TARGETS=fused_mlp SAME_CALL_ARGS="--rounds 20 --per-round 10 --rest-ms 400" bench/same_call_lease.sh .carry/kiln-0.1.0-x86_64.tar.gz $OUT/rest-$dt 2>&1 | grep -v "^\[.*export"
done
SAME_CALL_TARGETS=matmul,flash_attention SAME_CALL_ARGS="--rounds 20 --per-round 10 --rest-ms 400" bench/same_call_lease.sh .carry/kiln-0.1.0-x86_64.tar.gz $OUT/rest-other 2>&1 | grep -v "^\[.*export"
