#!/usr/bin/env bash
set -u
SAME_CALL_TARGETS=fused_mlp SAME_CALL_ARGS="--rounds 30 --per-round 10" bench/same_call_lease.sh .carry/kiln-0.1.0-x86_64.tar.gz $OUT/same 2>&1 | tail -30
