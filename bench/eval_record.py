#!/usr/bin/env python3
# One line of results.jsonl for the compare scripts (splitk_compare.sh, tma_compare.sh): the
# verdict and timing of one `kiln eval --json` at one shape with one configuration.
#   python3 bench/eval_record.py EVAL_JSON SHAPE PARAMS >> results.jsonl
import json
import sys

path, shape, params = sys.argv[1:4]
try:
    r = json.load(open(path))
except Exception as e:  # no JSON at all: the eval crashed or was killed
    r = {"outcome": "no result: %s" % e}
t = r.get("timing", {})
print(json.dumps({"shape": shape, "params": params, "outcome": r.get("outcome"),
                  "median_us": t.get("median_us"), "iqr_us": t.get("iqr_us"),
                  "sm_clock_mhz": t.get("sm_clock_mhz"),
                  "grid": r.get("geometry", {}).get("grid"), "log": r.get("log", "")[:300]}))
