#!/usr/bin/env bash
set -u
SAME_CALL_TARGETS=fused_mlp SAME_CALL_ARGS="--rounds 20 --per-round 10 --rest-ms 400 --pad-us 1000" bench/same_call_lease.sh .carry/kiln-0.1.0-x86_64.tar.gz $OUT/rest-f16 2>&1 | grep -v "^\[.*export"
python3 - $OUT/rest-f16/fused_mlp.json <<'PY'
import json, statistics, sys
r = json.load(open(sys.argv[1]))
for impl in r["impls"]:
    xs = [s for s in r["samples"] if s["impl"] == impl]
    slow = [s for s in xs if s["us"] > 1.04 * r["impls"][impl]["p10_us"]]
    fast = [s for s in xs if s["us"] <= 1.04 * r["impls"][impl]["p10_us"]]
    med = lambda v: statistics.median(v) if v else float("nan")
    print(impl, "fast", len(fast), "host median %.0f" % med([s["host_us"] for s in fast]),
          "| slow", len(slow), "host median %.0f" % med([s["host_us"] for s in slow]))
PY
