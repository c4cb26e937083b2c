#!/usr/bin/env python3
"""Where one fused_mlp launch spends its time, from bench/fused_mlp_trace.sh's records.

Reads the CSV of bench/fused_mlp_trace/trace_main.cu and, per traced launch, splits each block's
time (its consumer warpgroup 0, from the launch's first record to its last tile's end) into:

  work     from a tile's first full slot to the end of its epilogue (gate/up and down apart);
  wait     from asking for a tile's first slot to having it: the pipeline's refill and, for a
           down tile, the producer's wait for its row block of h (shown apart as `of which h`);
  end      idle after the block's last tile while others still work (the tail);
  other    the rest (between tiles, the launch's start).

Prints a table per launch: each share of blocks x span, tile medians, when the last gate/up tile
ended, and the spread of the blocks' end times.
    python3 bench/fused_mlp_trace_summary.py TRACE.csv M D H
"""
import csv
import statistics
import sys
from collections import defaultdict


def main():
    if len(sys.argv) != 5:
        sys.exit(__doc__.strip().splitlines()[-1].strip())
    path = sys.argv[1]
    M, D, H = (int(v) for v in sys.argv[2:5])
    t1 = -(-M // 128) * -(-H // 128)  # gate/up tickets (BM 128, BN/2 = 128 columns of h)
    reps = defaultdict(list)
    with open(path) as f:
        for row in csv.DictReader(f):
            reps[int(row["rep"])].append({k: int(v) for k, v in row.items()})
    if not reps:
        sys.exit("%s holds no records" % path)
    for rep, records in sorted(reps.items()):
        tiles = [r for r in records if r["kind"] == 0]
        deps = [r for r in records if r["kind"] == 2]
        if not tiles:
            print("launch %d: no tile records" % rep)
            continue
        start = min(r["t0_ns"] for r in records)
        end = max(r["t2_ns"] for r in tiles)
        span = end - start
        per_block = defaultdict(list)
        for r in tiles:
            per_block[r["block"]].append(r)
        dep_wait = defaultdict(int)
        for r in deps:
            dep_wait[r["block"]] += r["t1_ns"] - r["t0_ns"]
        shares = defaultdict(float)
        block_ends = []
        for block, rs in per_block.items():
            for r in rs:
                kind = "work gate/up" if r["ticket"] < t1 else "work down"
                shares[kind] += r["t2_ns"] - r["t1_ns"]
                shares["wait"] += r["t1_ns"] - r["t0_ns"]
            last = max(r["t2_ns"] for r in rs)
            block_ends.append(last)
            shares["end"] += end - last
            shares["of which h"] += dep_wait[block]
        blocks = len(per_block)
        accounted = sum(v for k, v in shares.items() if k != "of which h")
        shares["other"] = blocks * span - accounted
        p1 = [r["t2_ns"] - r["t1_ns"] for r in tiles if r["ticket"] < t1]
        p2 = [r["t2_ns"] - r["t1_ns"] for r in tiles if r["ticket"] >= t1]
        last_p1 = max((r["t2_ns"] for r in tiles if r["ticket"] < t1), default=start) - start
        print("launch %d: %.1f us over %d blocks (%d tile records, %d waits for h)" % (
            rep, span / 1e3, blocks, len(tiles), len(deps)))
        print("| share | of blocks x span |")
        print("|---|---|")
        for k in ("work gate/up", "work down", "wait", "of which h", "end", "other"):
            print("| %s | %.1f%% |" % (k, 100.0 * shares[k] / (blocks * span)))
        print("tiles: gate/up median %.2f us (%d), down median %.2f us (%d); the last gate/up tile "
              "ended at %.1f us; blocks ended between %.1f and %.1f us" % (
                  statistics.median(p1) / 1e3 if p1 else 0, len(p1),
                  statistics.median(p2) / 1e3 if p2 else 0, len(p2), last_p1 / 1e3,
                  (min(block_ends) - start) / 1e3, (max(block_ends) - start) / 1e3))
        print()


if __name__ == "__main__":
    main()
