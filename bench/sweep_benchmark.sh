#!/usr/bin/env bash
# The step-12 sweep benchmark on a GPU machine, in phases that each fit one 10-minute call:
#   bench/sweep_benchmark.sh run KILN SWEEP_FILE TARGET BUDGET OUTDIR [kiln run options...]
#       kiln run --targets TARGET --shapes SWEEP_FILE --budget BUDGET, then kiln export TARGET
#       (the dispatch table, each entry verified here at its shape); OUTDIR/run, OUTDIR/export.
#       With WALL=S in the environment the run gets SIGINT after S seconds: a run stopped that
#       way keeps its Redis (OUTDIR/run/redis) and is not exported; `resume` continues it.
#   bench/sweep_benchmark.sh resume KILN TARGET OUTDIR
#       kiln run --resume --out OUTDIR/run (WALL as above), then the export once it finished.
#   bench/sweep_benchmark.sh compare KILN TARGET RUN_FOLDER REF OUTDIR [pytorch args...]
#       the best configuration at shape REF (or REF = params=A=1,B=2: that configuration) timed at
#       every shape of the run (kiln eval --params
#       --shape: the single configuration for all shapes), right after the run's dispatch-table
#       entry for that shape (RUN_FOLDER/../export/dispatch.json), PyTorch at every shape
#       (bench/pytorch_baselines.py --shape; extra args go to it, e.g. --no-compile), then the
#       table of bench/sweep_summary.py in OUTDIR/table.md and OUTDIR/summary.json.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
phase=${1:?usage: see the header}
shift
case "$phase" in
  run | resume)
    if [[ "$phase" == run ]]; then
      kiln=$1 sweep=$2 target=$3 budget=$4 out=$5
      shift 5
      mkdir -p "$out"
      args=(--targets "$target" --shapes "$sweep" --budget "$budget" "$@")
    else
      kiln=$1 target=$2 out=$3
      args=(--resume)
    fi
    wall=()
    [[ -n "${WALL:-}" ]] && wall=(timeout -s INT -k 60 "$WALL")
    start=$(date +%s)
    "${wall[@]}" "$kiln" run "${args[@]}" --out "$out/run" --cache-dir "$out/cache" \
      >> "$out/run.stdout" 2>> "$out/run.stderr"
    echo "kiln $phase: rc=$?, $(( $(date +%s) - start )) s" | tee -a "$out/phases.txt"
    state=$(python3 -c "import json; print(json.load(open('$out/run/run.json'))['state'])" 2> /dev/null)
    if [[ "$state" != finished ]]; then
      echo "run $state: resume with $0 resume $kiln $target $out" | tee -a "$out/phases.txt"
      exit 0
    fi
    start=$(date +%s)
    "$kiln" export "$target" --out "$out/run" --to "$out/export" > "$out/export.stdout" 2>&1
    echo "kiln export: rc=$?, $(( $(date +%s) - start )) s" | tee -a "$out/phases.txt"
    rm -rf "$out/cache" "$out/run/redis"
    ;;
  compare)
    kiln=$1 target=$2 run=$3 ref=$4 out=$5
    shift 5
    mkdir -p "$out"
    python3 "$here/sweep_summary.py" "$run" "$target" --ref "$ref" --json "$out/kiln.json" > /dev/null
    if [[ "$ref" == params=* ]]; then  # a configuration given outright (e.g. the best of a 4096^3 run)
      params=${ref#params=}
    else
      params=$(python3 -c "import json,sys; p=json.load(open('$out/kiln.json'))['single_config'] or {}; print(','.join(f'{k}={v}' for k,v in sorted(p.items())))")
    fi
    [[ -n "$params" ]] || { echo "no best at $ref in $run" >&2; exit 1; }
    echo "single configuration: $params" | tee "$out/phases.txt"
    shapes=$(python3 -c "import json; print(' '.join(json.load(open('$out/kiln.json'))['shapes']))")
    # The dispatch table's own entry at each shape is timed right before the single
    # configuration, so that both see the GPU in the same state (a GPU that has run the search for
    # minutes runs its largest GEMMs at a lower clock than one that was idle).
    table=$(dirname "$run")/export/dispatch.json
    time_at() {  # time_at PARAMS SHAPE STEM -> the verified median in us, or null; STEM.json keeps
      # the whole result (its timing has the SM clock and the throttled samples), STEM.stderr the log
      "$kiln" eval "$target" --params "$1" --shape "$2" --json > "$3.json" 2> "$3.stderr"
      python3 -c "import json,sys
try:
    r = json.load(open('$3.json')); print(r['timing']['median_us'] if r['outcome'] == 'verified' else 'null')
except Exception:
    print('null')"
    }
    echo "{" > "$out/single.json"
    echo "{" > "$out/table.json"
    sep=""
    for s in $shapes; do
      if [[ -f "$table" ]]; then
        entry=$(python3 -c "import json
for e in json.load(open('$table')):
    if ','.join(f'{k}={v}' for k, v in sorted(e['shape'].items())) == '$s': print(','.join(f'{k}={v}' for k, v in sorted(e['params'].items()))); break")
        us=null
        [[ -n "$entry" ]] && us=$(time_at "$entry" "$s" "$out/table-$s")
        echo "$sep\"$s\": $us" >> "$out/table.json"
        echo "table $s: $us" | tee -a "$out/phases.txt"
      fi
      us=$(time_at "$params" "$s" "$out/single-$s")
      echo "$sep\"$s\": $us" >> "$out/single.json"
      sep=","
      echo "single $s: $us" | tee -a "$out/phases.txt"
    done
    echo "}" >> "$out/single.json"
    echo "}" >> "$out/table.json"
    echo "{" > "$out/pytorch.json"
    sep=""
    for s in $shapes; do
      python3 "$here/pytorch_baselines.py" --targets "$target" --shape "$s" --out "$out/pytorch-$s.json" \
        --target-budget-s 60 --reserve-max-s 1000 "$@" > "$out/pytorch-$s.log" 2>&1
      impls=$(python3 -c "import json
j = json.load(open('$out/pytorch-$s.json'))['targets']['$target']['impls']
print(json.dumps({k: v['timing']['median_us'] for k, v in j.items() if v.get('status') == 'ok'}))" 2> /dev/null || echo "{}")
      echo "$sep\"$s\": $impls" >> "$out/pytorch.json"
      sep=","
      echo "pytorch $s: $impls" | tee -a "$out/phases.txt"
    done
    echo "}" >> "$out/pytorch.json"
    python3 "$here/sweep_summary.py" "$run" "$target" --ref "$ref" --single "$out/single.json" \
      --table "$out/table.json" --pytorch "$out/pytorch.json" --json "$out/summary.json" \
      --md "$out/table.md"
    ;;
  *) echo "unknown phase $phase (run or compare)" >&2; exit 2 ;;
esac
