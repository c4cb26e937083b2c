#!/usr/bin/env bash
set -u
mkdir -p $OUT/check
OUT=$OUT/check timeout 580 scripts/gpu_check .carry/kiln-0.1.0-x86_64.tar.gz > $OUT/check/stdout.txt 2>&1
echo "rc=$?"
grep -v "^PASS" $OUT/check/stdout.txt | tail -40
echo "PASS: $(grep -c '^PASS' $OUT/check/stdout.txt)  FAIL: $(grep -c '^FAIL' $OUT/check/stdout.txt)"
