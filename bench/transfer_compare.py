#!/usr/bin/env python3
"""Transfer against a cold start: two shape-sweep runs of one target compared shape by shape.

Usage: bench/transfer_compare.py COLD_RESULTS TRANSFER_RESULTS TARGET [--md OUT] [--json OUT]

COLD_RESULTS is the results.jsonl (or .jsonl.gz) of `kiln run --shapes ... --no-transfer`,
TRANSFER_RESULTS that of the same run with transfer on. Per shape, for each run: its evaluations
(re-times not counted), its best verified time, and how many evaluations it took to first measure a
time within 5% of (a) its own final best and (b) the joint best, the faster of the two runs' bests
at that shape ("never" when it did not get there). (b) is the fairer count where one run found a
better kernel than the other; (a) is what `bench/sweep_summary.py` reports. Results timed with early
stop do not count as bests, as in sweep_summary.py.

A second table replays a population that starts after its neighbours converged (a shape added to a
finished sweep, a GPU model that joins late): its first children are the final bests of its
kTransferNeighbours (3) nearest shapes (the engine's distance: the sum of |log2| of the dims'
ratios) from the transfer run, in order of distance. Their times at the shape are looked up among
both runs' results there (the median of their measurements); the row says how many evaluations the
population needs, its seed included, to come within 5% of the joint best: 1 + the position of the
first that does, or "3 + cold" when none does (the search then goes on as a cold one); a range
("2-3") where a neighbour's best before it was never timed at this shape, "?" where none of the
others came within 5% either.
"""
import argparse
import collections
import gzip
import json
import math
import statistics


def load(path, target):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        rows = [json.loads(l) for l in f if l.strip()]
    by = collections.OrderedDict()
    for r in sorted((r for r in rows if r.get("target") == target and r.get("shape")),
                    key=lambda r: r.get("at_s", 0)):
        if r.get("retime"):
            continue
        shape = r["shape"] if isinstance(r["shape"], str) else ",".join(f"{k}={v}" for k, v in r["shape"].items())
        by.setdefault(shape, []).append(r)
    return by


def config_key(params):
    return ",".join(f"{k}={v}" for k, v in sorted(params.items()))


def distance(a, b):
    """The engine's shape distance (coordinator/shape_sweep.cc): sum over dims of |log2(a/b)|."""
    da = dict(kv.split("=") for kv in a.split(","))
    db = dict(kv.split("=") for kv in b.split(","))
    return sum(abs(math.log2(int(da[d]) / int(db[d]))) for d in da)


def timed(r):
    """The verified median of a result timed in full, else None."""
    if r.get("outcome") != "verified" or r["timing"].get("stopped_early"):
        return None
    return r["timing"]["median_us"]


def first_within(evals, bound_us):
    for i, r in enumerate(evals):
        t = timed(r)
        if t is not None and t <= 1.05 * bound_us:
            return i + 1
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("cold")
    ap.add_argument("transfer")
    ap.add_argument("target")
    ap.add_argument("--md", default="")
    ap.add_argument("--json", default="")
    a = ap.parse_args()
    runs = {"cold": load(a.cold, a.target), "transfer": load(a.transfer, a.target)}
    shapes = [s for s in runs["transfer"] if s in runs["cold"]]
    out = {}
    for s in shapes:
        row = {}
        bests = {}
        for name, by in runs.items():
            times = [t for t in map(timed, by[s]) if t is not None]
            bests[name] = min(times) if times else None
        joint = min(b for b in bests.values() if b is not None)
        for name, by in runs.items():
            evals = by[s]
            row[name] = {"evaluations": len(evals), "best_us": bests[name],
                         "to_5pct_own": first_within(evals, bests[name]) if bests[name] else None,
                         "to_5pct_joint": first_within(evals, joint),
                         "transfer_children": sum(1 for r in evals if str(r.get("op", "")).startswith("transfer"))}
        row["joint_best_us"] = joint
        out[s] = row

    # The replay of a population started after its neighbours converged.
    measured = collections.defaultdict(lambda: collections.defaultdict(list))  # shape -> config -> us
    final = {}  # shape -> (us, config) of the transfer run's best
    for name, by in runs.items():
        for s, evals in by.items():
            for r in evals:
                us = timed(r)
                if us is None or r.get("kind") == "seed":
                    continue
                cfg = config_key(r.get("params", {}))
                measured[s][cfg].append(us)
                if name == "transfer" and (s not in final or us < final[s][0]):
                    final[s] = (us, cfg)
    late = {}
    for s in shapes:
        near = sorted((distance(s, u), u) for u in shapes if u != s and u in final)[:3]
        joint = out[s]["joint_best_us"]
        steps, needed, unknown = [], None, None
        for i, (_, u) in enumerate(near):
            times = measured[s].get(final[u][1])
            if not times:
                steps.append(None)
                unknown = i if unknown is None else unknown
                continue
            ratio = statistics.median(times) / joint
            steps.append(round(ratio, 3))
            if needed is None and ratio <= 1.05:
                # The seed, then the neighbours' bests in order; one never timed here may or may not
                # have come within 5% first.
                needed = str(i + 2) if unknown is None else f"{unknown + 2}-{i + 2}"
        if needed is None:
            needed = "?" if unknown is not None else f"3 + {out[s]['cold']['to_5pct_joint']}"
        late[s] = {"neighbours": [u for _, u in near], "time_over_joint_best": steps, "to_5pct": needed}

    def cell(v):
        return "never" if v is None else str(v)

    lines = ["| shape | cold evals | cold best µs | transfer evals | transfer best µs | to 5% of own best: cold / transfer "
             "| to 5% of joint best: cold / transfer |", "|---|---|---|---|---|---|---|"]
    for s, row in out.items():
        c, t = row["cold"], row["transfer"]
        lines.append(f"| {s} | {c['evaluations']} | {c['best_us']:.1f} | {t['evaluations']} | {t['best_us']:.1f} "
                     f"| {cell(c['to_5pct_own'])} / {cell(t['to_5pct_own'])} "
                     f"| {cell(c['to_5pct_joint'])} / {cell(t['to_5pct_joint'])} |")
    totals = {}
    for key in ("to_5pct_own", "to_5pct_joint"):
        for name in ("cold", "transfer"):
            vals = [row[name][key] for row in out.values()]
            reached = [v for v in vals if v is not None]
            totals[f"{name}_{key}"] = {"sum": sum(reached), "median": statistics.median(reached) if reached else None,
                                       "never": len(vals) - len(reached)}
    lines.append("")
    for key, what in (("to_5pct_own", "own best"), ("to_5pct_joint", "joint best")):
        c, t = totals[f"cold_{key}"], totals[f"transfer_{key}"]
        lines.append(f"- evaluations to within 5% of the {what}: cold {c['sum']} in all (median {c['median']}, "
                     f"{c['never']} never), transfer {t['sum']} (median {t['median']}, {t['never']} never)")
    lines += ["", "A population started after its neighbours converged (replay):", "",
              "| shape | neighbours' bests here, time over the joint best | evaluations to 5% (seed included) "
              "| cold run, to 5% of the joint best |", "|---|---|---|---|"]
    for s, row in late.items():
        ratios = ", ".join("not timed here" if r is None else f"{r:.3f}" for r in row["time_over_joint_best"])
        lines.append(f"| {s} | {ratios} | {row['to_5pct']} | {cell(out[s]['cold']['to_5pct_joint'])} |")
    text = "\n".join(lines)
    print(text)
    if a.md:
        open(a.md, "w").write(text + "\n")
    if a.json:
        json.dump({"shapes": out, "totals": totals, "late_start": late}, open(a.json, "w"), indent=1)


if __name__ == "__main__":
    main()
