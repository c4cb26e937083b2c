#!/usr/bin/env bash
# The TMA-descriptor prefetch in matmul's template: the bundle's template (HEAD, "base") against
# the working tree's ("pre", KILN_TARGETS_DIR), alternating, at 4096^3;
# then each side's kernel under ncu (bench/gemm_ncu.sh, kiln's side only).
set -u
mkdir -p /tmp/kb && tar -C /tmp/kb -xzf .carry/kiln-0.1.0-x86_64.tar.gz
b=$(ls -d /tmp/kb/kiln-*/)
export KILN_CACHE_DIR=/tmp/kiln-cache
printf '#!/bin/sh\nKILN_TARGETS_DIR=%s/targets exec %s/bin/kiln "$@"\n' "$PWD" "$b" > /tmp/kiln-pre
chmod +x /tmp/kiln-pre
cases=bench/cases/step13-tmap-prefetch.txt
for round in 1 2; do
  for side in base pre; do
    k=$b/bin/kiln; [[ $side == pre ]] && k=/tmp/kiln-pre
    CACHE_DIR=/tmp/mm-cache-$side timeout 150 bench/matmul_compare.sh $k $cases /tmp/mm-$side-$round > /tmp/mm-$side-$round.log 2>&1
    echo "$side round $round: rc=$?"
    mkdir -p $OUT/mm-$side-$round; cp /tmp/mm-$side-$round/{results.jsonl,table.md} $OUT/mm-$side-$round/ 2>/dev/null
    cat /tmp/mm-$side-$round/table.md
  done
done
for side in base pre; do
  [[ $side == pre ]] && export KILN_TARGETS_DIR=$PWD/targets
  GEMM_NCU_TARGETS=matmul GEMM_NCU_SIDES=kiln timeout 170 bench/gemm_ncu.sh .carry/kiln-0.1.0-x86_64.tar.gz $OUT/ncu-$side > /dev/null 2>&1
  echo "ncu $side: rc=$?"
done
for side in base pre; do python3 bench/gemm_ncu_summary.py $OUT/ncu-$side; done
