#!/usr/bin/env bash
# Evaluations per GPU-hour of `kiln run` on the nine-target mix (issue #20's goal: >= 1,800 full
# evaluations per GPU-hour), by wall time from the command's start to its exit, and where each
# target's evaluations spend their time (bench/eval_phases.py). Runs on a GPU machine:
#   bench/eval_rate_mix.sh KILN_BINARY OUTDIR [budget] [extra kiln run flags...]
# Environment: MIX_TARGETS (default: the nine), MIX_GPUS (default 0).
set -uo pipefail
kiln=${1:?usage: bench/eval_rate_mix.sh KILN_BINARY OUTDIR [budget] [flags...]}
out=${2:?usage: bench/eval_rate_mix.sh KILN_BINARY OUTDIR [budget] [flags...]}
budget=${3:-150s}
shift 3 2> /dev/null || shift $#
targets=${MIX_TARGETS:-rmsnorm,softmax,cross_entropy,reduce,layernorm,rotary_embedding,matmul,flash_attention,fused_mlp}
gpus=${MIX_GPUS:-0}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
start=$(date +%s.%N)
"$kiln" run --targets "$targets" --gpus "$gpus" --budget "$budget" --patience 100000 \
  --out "$out/run" --cache-dir "$out/cache" "$@" > "$out/run.stdout" 2> "$out/run.stderr"
rc=$?
end=$(date +%s.%N)
wall=$(python3 -c "print(f'{$end - $start:.1f}')")
ngpu=$(tr ',' '\n' <<< "$gpus" | wc -l)
echo "kiln run --budget $budget --gpus $gpus $*: rc=$rc, wall ${wall} s" | tee "$out/summary.txt"
python3 "$here/eval_phases.py" "$out/run" --wall-s "$wall" --gpus "$ngpu" | tee -a "$out/summary.txt"
rm -rf "$out/cache" "$out/run/redis"/*.rdb "$out/run/redis"/appendonly* 2> /dev/null
tail -c 3000 "$out/run.stderr" > "$out/run.stderr.tail"
