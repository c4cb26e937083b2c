#!/usr/bin/env bash
# The fault suite (tests/integration/fault_suite_test.cc) at nightly size: one farm on the cpu
# backend through many evaluator kills, coordinator kill-and-resumes and Redis restarts, a SIGSTOP,
# a rogue peer and a mismatched evaluator. Writes the suite's "fault suite: ..." lines (what was
# done, results, duplicates, forgeries, times) and its exit status to RESULTS, the whole output to
# RESULTS.log.
# Usage: bench/fault_nightly.sh [BUILD_DIR] [RESULTS]
#   BUILD_DIR: where kiln_integration_tests was built (default: build)
#   RESULTS: default bench/results/<date>-fault-nightly.txt
# Env (defaults: nightly size): KILN_FAULTS_EVALUATOR_KILLS=1000, KILN_FAULTS_COORDINATOR_KILLS=100,
#   KILN_FAULTS_REDIS_RESTARTS=20, KILN_FAULTS_REDIS_DOWN_S=5, KILN_FAULTS_WINDOW_S (default: from
#   the counts, 2.5 s per evaluator kill), KILN_FAULTS_SEED (default: random; printed).
set -uo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${1:-$repo/build}
results=${2:-$repo/bench/results/$(date -u +%Y-%m-%d)-fault-nightly.txt}
tests="$build/bin/kiln_integration_tests"
[ -x "$tests" ] || tests=$(find "$build" -name kiln_integration_tests -type f -perm -u+x | head -1)
if [ -z "$tests" ] || [ ! -x "$tests" ]; then
  echo "fault_nightly: no kiln_integration_tests under $build; build it with" \
       "\`ninja -C $build kiln kiln_integration_tests\`" >&2
  exit 2
fi
export KILN_FAULTS_EVALUATOR_KILLS=${KILN_FAULTS_EVALUATOR_KILLS:-1000}
export KILN_FAULTS_COORDINATOR_KILLS=${KILN_FAULTS_COORDINATOR_KILLS:-100}
export KILN_FAULTS_REDIS_RESTARTS=${KILN_FAULTS_REDIS_RESTARTS:-20}
export KILN_FAULTS_REDIS_DOWN_S=${KILN_FAULTS_REDIS_DOWN_S:-5}
mkdir -p "$(dirname "$results")"
start=$(date +%s)
"$tests" --gtest_filter='FaultSuite.*' > "$results.log" 2>&1
rc=$?
{
  echo "# kiln fault suite, nightly size, $(date -u +%Y-%m-%dT%H:%M:%SZ), $(git -C "$repo" rev-parse --short HEAD 2>/dev/null)"
  echo "# $(nproc) cores; evaluator kills $KILN_FAULTS_EVALUATOR_KILLS, coordinator kills $KILN_FAULTS_COORDINATOR_KILLS," \
       "redis restarts $KILN_FAULTS_REDIS_RESTARTS of $KILN_FAULTS_REDIS_DOWN_S s"
  grep '^fault suite:\|^rogue:' "$results.log"
  echo "exit status $rc, $(( $(date +%s) - start )) s"
} > "$results"
cat "$results"
exit $rc
