#!/usr/bin/env bash
# The cpu backend's timing beside another process that streams memory: RUNS evaluations of an
# honest seed (`kiln eval reduce --backend cpu`) while a helper writes 64 MiB over and over for
# ON_MS, then sleeps OFF_MS. Per run: the outcome, the timings taken, and the samples the machine
# probe saw busy and set aside (docs/evaluator.md, "machine probe"); a timing that set samples
# aside is one that without the probe would have been refused as bimodal or noisy and timed again.
#   bench/cpu_timing_under_load.sh KILN_BINARY [RUNS] [ON_MS] [OFF_MS] [SHAPE]
set -euo pipefail
kiln=${1:?usage: bench/cpu_timing_under_load.sh KILN_BINARY [RUNS] [ON_MS] [OFF_MS] [SHAPE]}
runs=${2:-10}
on_ms=${3:-50}
off_ms=${4:-50}
shape=${5:-M=64,N=512}
here=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'kill "$streamer" 2> /dev/null || true; rm -rf "$work"' EXIT
cat > "$work/streamer.c" << 'C'
#include <stdlib.h>
#include <string.h>
#include <time.h>
int main(int argc, char** argv) {
  const long on = atol(argv[1]), off = atol(argv[2]);
  const size_t n = (size_t)64 << 20;
  unsigned char* b = malloc(n);
  for (unsigned char k = 0;; ++k) {
    struct timespec s, t;
    clock_gettime(CLOCK_MONOTONIC, &s);
    do {
      memset(b, k, n);
      clock_gettime(CLOCK_MONOTONIC, &t);
    } while ((t.tv_sec - s.tv_sec) * 1000 + (t.tv_nsec - s.tv_nsec) / 1000000 < on);
    struct timespec pause = {off / 1000, (off % 1000) * 1000000};
    nanosleep(&pause, NULL);
  }
}
C
cc -O2 -o "$work/streamer" "$work/streamer.c"
"$work/streamer" "$on_ms" "$off_ms" &
streamer=$!
echo "kiln eval reduce --backend cpu --shape $shape, $runs runs beside a process writing 64 MiB" \
  "for ${on_ms} ms then idle for ${off_ms} ms ($(nproc) cores)"
for i in $(seq 1 "$runs"); do
  "$kiln" eval reduce --backend cpu --shape "$shape" --json --cache-dir "$work/cache" \
    --targets-dir "$here/targets" 2> /dev/null > "$work/run$i.json" || true
  python3 - "$work/run$i.json" "$i" << 'PY'
import json, sys
j = json.load(open(sys.argv[1]))
m = j.get("metrics", {})
timing = [s for s in j.get("stages", []) if s["name"] == "timing"]
detail = timing[0]["detail"] if timing else j.get("log", "")
print(f"run {sys.argv[2]}: {j['outcome']}, timings {int(m.get('timing_attempts', 0))}, "
      f"busy samples set aside {int(m.get('busy_samples', 0))}, median "
      f"{j.get('timing', {}).get('median_us', 0):.1f} us; {detail[:160]}")
PY
done
