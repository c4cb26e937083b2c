#!/usr/bin/env bash
# Everything one GPU-machine lease measures for the step-3/step-4 results, run as ONE background
# job so the figures come from one machine in one sitting:
#   1. scripts/gpu_check          every GPU-labelled test of the bundle, selftest, version;
#   2. bench/targets_vs_pytorch   per group of targets: seed, full template sweep, best again,
#                                 PyTorch eager / torch.compile default / max-autotune;
#   3. ncu                        the best configuration of each target under Nsight Compute (DRAM
#                                 and SM throughput, occupancy, L2 hits), where ncu can read counters;
#   4. kiln run                   the real search (coordinator + evaluator + built-in proposer) on
#                                 the memory-bound targets, for issue #5's "within 5% of step 3".
# Progress goes to OUTDIR/progress.log; OUTDIR/DONE appears at the end. The device tool returns
# a call's output when the call ends, so start this with setsid and collect OUTDIR in later calls:
#   setsid bench/gpu_lease.sh .carry/kiln-0.1.0-x86_64.tar.gz /tmp/lease > /dev/null 2>&1 &
# Options (environment): LEASE_GROUPS ("a,b;c,d" target groups; empty: no bench), LEASE_RUN_TARGETS,
# LEASE_RUN_BUDGET (default 6m), LEASE_SKIP_CHECK=1, LEASE_SKIP_NCU=1, LEASE_NCU_TARGETS (a,b: only
# these under ncu), LEASE_PROFILE=1 (kiln eval --profile of rmsnorm/matmul seed and best, and
# bench/profile_vs_torch.sh with LEASE_PROFILE_ARGS), LEASE_ABLATION=1 (a second kiln run without
# profile guidance), LEASE_PROFILED_SWEEPS (a,b: the seed and the whole template sweep of these
# targets with --profile, into OUTDIR/sweeps/, for bench/search_replay.cc's guidance ablation),
# LEASE_SCALING=1 (bench/gpu_scaling.sh into OUTDIR/scaling, last, on a machine
# with two GPUs; SCALING_TARGETS and SCALING_BUDGET pass through), LEASE_NCU_PLAN (a file of "target params" lines, "seed" for the seed: profile
# these instead of the bench's best), LEASE_NCU_LAUNCHES (launches profiled per eval, default 160). Follow-up calls must check that OUTDIR exists: a machine left idle for 30 s is
# given back, and the next call gets a fresh one without it.
set -uo pipefail
tarball=${1:?usage: bench/gpu_lease.sh KILN_TARBALL OUTDIR}
out=${2:?usage: bench/gpu_lease.sh KILN_TARBALL OUTDIR}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(dirname "$here")
mkdir -p "$out"
log() { echo "[$(date -u +%H:%M:%S)] $*" | tee -a "$out/progress.log" >&2; }

unpacked=$(mktemp -d /tmp/kiln-lease.XXXXXX)
tar -C "$unpacked" -xzf "$tarball" || { log "cannot unpack $tarball"; exit 2; }
bundle=$(ls -d "$unpacked"/kiln-*/ | head -1)
kiln="$bundle/bin/kiln"
export KILN_CACHE_DIR=/tmp/kiln-lease-cache
log "bundle: $("$kiln" version 2>&1 | head -1)"
nvidia-smi -L >> "$out/progress.log" 2>&1

if [[ "${LEASE_SKIP_CHECK:-0}" != 1 ]]; then
  log "gpu_check: start"
  OUT="$out/gpu_check" "$repo/scripts/gpu_check" "$bundle" > "$out/gpu_check.log" 2>&1 &
  check=$!
  # A kiln process that outlives what any GPU test needs (100 s) is stuck: record where each of
  # its threads waits (wchan, syscall, kernel stack) and its open files, then kill it so the
  # lease goes on.
  while kill -0 "$check" 2> /dev/null; do
    sleep 5
    for pid in $(pgrep -f "^$bundle/*bin/kiln (run|evaluator|__sandbox)"); do
      age=$(($(date +%s) - $(stat -c %Y /proc/"$pid" 2> /dev/null || date +%s)))
      [[ $age -gt 100 ]] || continue
      {
        echo "== pid $pid ($age s): $(tr '\0' ' ' < /proc/"$pid"/cmdline)"
        for t in /proc/"$pid"/task/*; do
          echo "thread $(basename "$t") $(cat "$t"/comm) wchan=$(cat "$t"/wchan) syscall=$(cut -d' ' -f1-3 "$t"/syscall)"
          sed 's/^/    /' "$t"/stack 2> /dev/null
        done
        ls -l /proc/"$pid"/fd 2> /dev/null
      } >> "$out/stuck.txt" 2>&1
    done
    if [[ -s "$out/stuck.txt" ]]; then
      log "gpu_check: stuck kiln processes recorded in stuck.txt; killing them"
      pkill -9 -f "^$bundle/*bin/kiln (run|evaluator|__sandbox)"
      : > "$out/stuck.done"; mv "$out/stuck.txt" "$out/stuck-$(date +%s).txt"
    fi
  done
  wait "$check"
  log "gpu_check: rc=$? $(tail -1 "$out/gpu_check.log")"
fi

groups=${LEASE_GROUPS-"rmsnorm,softmax,reduce;layernorm,rotary_embedding,cross_entropy;matmul,flash_attention,fused_mlp"}
IFS=';' read -ra group_list <<< "$groups"
i=0
for g in "${group_list[@]}"; do
  i=$((i + 1))
  log "bench group $i ($g): start"
  timeout 1500 "$repo/bench/targets_vs_pytorch.sh" "$bundle" --targets "$g" --out "$out/bench-$i" \
    > "$out/bench-$i.stdout" 2> "$out/bench-$i.progress"
  log "bench group $i: rc=$? $(grep -c verified "$out/bench-$i.progress" 2>/dev/null) verified lines"
done

if [[ "${LEASE_SKIP_NCU:-0}" != 1 ]] && command -v ncu > /dev/null; then
  # The best configuration of each target from the bench's command log. ncu profiles every
  # launch of the candidate's entry point (kiln's own probes are named kiln_* and skipped) during a
  # whole `kiln eval`: verification launches are small, the timed ones run at the benchmark shape;
  # the CSV is reduced later to the launches with the largest grid.
  if [[ -n "${LEASE_NCU_PLAN:-}" ]]; then grep -v '^#' "$LEASE_NCU_PLAN" > "$out/ncu-plan.txt"; fi
  for cmds in "$out"/bench-*/commands-*.jsonl; do
    [[ -f "$cmds" ]] || continue
    python3 - "$cmds" > "$out/ncu-plan.txt.part" <<'EOF'
import json, sys
for line in open(sys.argv[1]):
    c = json.loads(line)
    a = c["argv"]
    if "--params" in a and "--sweep" not in a:
        print(a[2], a[a.index("--params") + 1])
EOF
    cat "$out/ncu-plan.txt.part" >> "$out/ncu-plan.txt"
  done
  rm -f "$out/ncu-plan.txt.part"
  while read -r t params; do
    if [[ -n "${LEASE_NCU_TARGETS:-}" && ",${LEASE_NCU_TARGETS}," != *",$t,"* ]]; then continue; fi
    log "ncu $t $params"
    if [[ "$params" == seed ]]; then what=(); else what=(--params "$params"); fi
    timeout 240 ncu --clock-control none --target-processes all --launch-count "${LEASE_NCU_LAUNCHES:-160}" --csv \
      --section SpeedOfLight --section LaunchStats --section Occupancy \
      --metrics lts__t_sector_hit_rate.pct,l1tex__t_sector_hit_rate.pct,dram__bytes_read.sum,dram__bytes_write.sum \
      -k "regex:^(?!kiln_)" "$kiln" eval "$t" "${what[@]}" --cache-dir /tmp/kiln-ncu-cache \
      > "$out/ncu-$t-${params//[^A-Za-z0-9=]/_}.txt" 2>&1
    log "ncu $t: rc=$?"
  done < "$out/ncu-plan.txt"
fi
if [[ "${LEASE_PROFILE:-0}" == 1 ]]; then
  # Step 5: CUPTI metrics, class and hints of the seed and best rmsnorm and matmul (kiln eval
  # --profile), then `kiln profile` against torch.profiler on a small training step.
  while read -r t params; do
    if [[ "$params" == seed ]]; then what=(); else what=(--params "$params"); fi
    log "profile $t $params"
    timeout 240 "$kiln" eval "$t" "${what[@]}" --profile --json --cache-dir "$KILN_CACHE_DIR" \
      > "$out/profile-$t-${params//[^A-Za-z0-9=]/_}.json" 2> "$out/profile-$t-${params//[^A-Za-z0-9=]/_}.log"
    log "profile $t: rc=$?"
  done < <(grep -E '^(rmsnorm|matmul) ' "$repo/bench/ncu_plan_h100.txt")
  log "profile_vs_torch: start"
  timeout 400 "$repo/bench/profile_vs_torch.sh" "$bundle" ${LEASE_PROFILE_ARGS:-} \
    > "$out/profile_vs_torch.log" 2>&1
  log "profile_vs_torch: rc=$? $(tail -1 "$out/profile_vs_torch.log")"
fi

if [[ -n "${LEASE_PROFILED_SWEEPS:-}" ]]; then
  # Every configuration timed and profiled (bottleneck class per configuration): what the replay
  # benchmark needs to compare guided and unguided searches over many seeds on a CPU.
  mkdir -p "$out/sweeps"
  for t in ${LEASE_PROFILED_SWEEPS//,/ }; do
    log "profiled sweep $t: start"
    timeout 120 "$kiln" eval "$t" --profile --json --cache-dir "$KILN_CACHE_DIR" \
      > "$out/sweeps/$t.seed.json" 2> "$out/sweeps/$t.seed.log"
    timeout 600 "$kiln" eval "$t" --sweep --profile --json --cache-dir "$KILN_CACHE_DIR" \
      > "$out/sweeps/$t.sweep.json" 2> "$out/sweeps/$t.sweep.log"
    log "profiled sweep $t: rc=$?"
  done
fi

run_targets=${LEASE_RUN_TARGETS-"rmsnorm,softmax,reduce,layernorm,rotary_embedding,cross_entropy"}
if [[ -n "$run_targets" ]]; then
  log "kiln run ($run_targets, budget ${LEASE_RUN_BUDGET:-6m}): start"
  timeout 1200 "$kiln" run --targets "$run_targets" --budget "${LEASE_RUN_BUDGET:-6m}" \
    --out "$out/run" --cache-dir "$KILN_CACHE_DIR" > "$out/run.stdout" 2> "$out/run.stderr"
  log "kiln run: rc=$?"
  rm -f "$out"/run/redis/*.rdb 2>/dev/null
  if [[ "${LEASE_ABLATION:-0}" == 1 ]]; then
    # The same search without profile guidance (issue #6's ablation): its own cache of compiles
    # and references is not shared, so neither run starts warm from the other.
    log "kiln run --no-profile-guidance: start"
    timeout 1200 "$kiln" run --targets "$run_targets" --budget "${LEASE_RUN_BUDGET:-6m}" --no-profile-guidance \
      --out "$out/run-unguided" --cache-dir /tmp/kiln-lease-cache-unguided \
      > "$out/run-unguided.stdout" 2> "$out/run-unguided.stderr"
    log "kiln run --no-profile-guidance: rc=$?"
    rm -f "$out"/run-unguided/redis/*.rdb 2>/dev/null
  fi
fi

if [[ "${LEASE_SCALING:-0}" == 1 ]]; then
  if [[ $(nvidia-smi -L 2> /dev/null | grep -c '^GPU') -ge 2 ]]; then
    log "gpu_scaling: start"
    "$here/gpu_scaling.sh" "$tarball" "$out/scaling" > /dev/null 2>&1
    log "gpu_scaling: rc=$?, $(tr -d '\n ' < "$out/scaling/scaling.json" 2> /dev/null)"
  else
    log "gpu_scaling: skipped (fewer than two GPUs)"
  fi
fi

log "done"
touch "$out/DONE"
