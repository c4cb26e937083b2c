#!/usr/bin/env python3
"""Where an evaluation's wall time goes, per target, from a run folder's results.jsonl.

Usage: bench/eval_phases.py RUN_FOLDER [--wall-s SECONDS] [--gpus N]

Each verified result carries the evaluator's phase marks (metrics *_at_ms, milliseconds since the
evaluation began); this prints, per target (and shape), the count, the mean wall time and the mean
time between consecutive marks, so the slowest phase of each target shows. With --wall-s (the
run's wall time) it also prints evaluations per GPU-hour by wall time.
"""
import argparse
import collections
import json
import pathlib

MARKS = ["prepare_ms", "verified_at_ms", "inputs_ready_at_ms", "timed_at_ms", "references_at_ms",
         "closing_checked_at_ms", "kept_checked_at_ms", "profiled_at_ms"]


def unit_of(r):
    unit = r.get("unit") or r.get("target") or "?"
    return unit


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("run")
    ap.add_argument("--wall-s", type=float, default=0)
    ap.add_argument("--gpus", type=int, default=1)
    a = ap.parse_args()
    path = pathlib.Path(a.run) / "results.jsonl"
    rows = [json.loads(l) for l in open(path) if l.strip()]
    by = collections.defaultdict(list)
    for r in rows:
        by[unit_of(r)].append(r)
    print(f"{len(rows)} results in {path}")
    head = "unit".ljust(34) + " n   wall_ms " + " ".join(m.replace("_at_ms", "").replace("_ms", "")[:9].rjust(9) for m in MARKS) + "  samples"
    print(head)
    total_wall = 0.0
    for unit, rs in sorted(by.items()):
        wall = sum(r.get("wall_ms", 0) for r in rs) / len(rs)
        total_wall += sum(r.get("wall_ms", 0) for r in rs)
        cells = []
        prev = 0.0
        for m in MARKS:
            vals = [r.get("metrics", {}).get(m) for r in rs]
            vals = [v for v in vals if v is not None]
            if not vals:
                cells.append("-".rjust(9))
                continue
            mean = sum(vals) / len(vals)
            cells.append(f"{mean - prev:9.0f}")
            prev = mean
        samples = [r.get("timing", {}).get("samples", 0) for r in rs if r.get("outcome") == "verified"]
        s = f"{sum(samples) / len(samples):.0f}" if samples else "-"
        print(f"{unit[:34]:34} {len(rs):3d} {wall:8.0f} " + " ".join(cells) + f"  {s}")
    print(f"sum of evaluation wall times: {total_wall / 1000:.0f} s")
    if a.wall_s > 0:
        per_hour = len(rows) / a.wall_s * 3600 / a.gpus
        print(f"evaluations per GPU-hour by wall time: {per_hour:.0f} ({len(rows)} in {a.wall_s:.0f} s on {a.gpus} GPU(s))")


if __name__ == "__main__":
    main()
