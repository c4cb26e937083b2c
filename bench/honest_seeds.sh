#!/usr/bin/env bash
# How often an honest kernel is refused: every target's seed verified N times (`kiln eval T
# --no-time`), each time on fresh secret inputs, so a tolerance that fails an honest rounding
# error on one draw in a few hundred shows as a count here rather than as a flaky CI run. A seed
# refused even once is listed with the stage and detail of each refusal.
# Usage: bench/honest_seeds.sh KILN_BINARY [RUNS] [BACKEND] [TARGETS]
#   RUNS     verifications per target (default 100)
#   BACKEND  cpu (default) or cuda
#   TARGETS  comma-separated (default: every built-in target the backend has a seed for)
# Writes OUT/honest_seeds.md (OUT defaults to ./bench-out) and prints it.
# TARGET_SECONDS (env, default 0: none) stops a target's verifications once they have taken that
# long, so that a slow one (prefixsum_v2: ~35 s each on an H200) cannot eat a device lease; its
# row then says how many ran.
set -uo pipefail
kiln=${1:?usage: $0 KILN_BINARY [RUNS] [BACKEND] [TARGETS]}
runs=${2:-100}
backend=${3:-cpu}
targets=${4:-}
out=${OUT:-$PWD/bench-out}
mkdir -p "$out"
cache=${CACHE_DIR:-$(mktemp -d)}

if [ -z "$targets" ]; then
  # The listing's backends column names each backend as "cpu (seed ...)".
  targets=$("$kiln" targets 2>/dev/null | awk -v b="$backend (" 'index($0, b) { printf "%s%s", sep, $1; sep = "," }')
fi
[ -n "$targets" ] || { echo "no targets for backend $backend" >&2; exit 2; }

report="$out/honest_seeds.md"
{
  echo "# Honest seeds on fresh inputs: $runs verifications each, backend $backend"
  echo
  echo "kiln: $("$kiln" version 2>/dev/null | head -1); host: $(hostname); $(date -u +%FT%TZ)"
  echo
  echo "| target | verified | refused | seconds |"
  echo "|---|---:|---:|---:|"
} > "$report"
details=$(mktemp)
IFS=, read -ra list <<< "$targets"
for t in "${list[@]}"; do
  ok=0 bad=0 start=$(date +%s)
  limit=${TARGET_SECONDS:-0} cut=""
  for ((i = 1; i <= runs; i++)); do
    if ((limit > 0 && $(date +%s) - start >= limit)); then
      cut=" (stopped after $((i - 1)) of $runs: TARGET_SECONDS=$limit)"
      break
    fi
    if json=$("$kiln" eval "$t" --backend "$backend" --no-time --json --cache-dir "$cache" 2>/dev/null); then
      ok=$((ok + 1))
    else
      bad=$((bad + 1))
      printf '%s' "$json" | python3 -c '
import json, sys
t, i = sys.argv[1], sys.argv[2]
try:
    r = json.load(sys.stdin)
except ValueError:
    print(f"- {t} run {i}: no JSON result"); sys.exit()
failed = [s for s in r.get("stages", []) if not s.get("passed", True)]
s = failed[0] if failed else {"name": "?", "detail": r.get("log", "")}
outcome, stage, detail = r.get("outcome"), s["name"], s.get("detail", "")[:600]
print(f"- {t} run {i}: {outcome} at {stage}: {detail}")' "$t" "$i" >> "$details"
    fi
    printf '\r%s: %d/%d (%d refused)' "$t" "$i" "$runs" "$bad" >&2
  done
  printf '\n' >&2
  echo "| $t$cut | $ok | $bad | $(($(date +%s) - start)) |" >> "$report"
done
if [ -s "$details" ]; then
  { echo; echo "## Refusals"; echo; cat "$details"; } >> "$report"
fi
rm -f "$details"
cat "$report"
