#!/usr/bin/env python3
"""A model of fused_mlp's persistent tile queue (ARCH 2): how much time the schedule itself loses.

Tickets are handed out in order to whichever of GRID blocks frees first. A gate/up tile costs its
k-steps (D / 64) plus an epilogue; a down tile costs H / 64 k-steps plus an epilogue, and waits
until every gate/up tile of its row block is done. The ticket order follows the template's
tile_of() with NG row groups. Each tile's time is scaled by a normal jitter. Prints, per NG:

  end      when the last block finishes;
  work     the mean work per block (the end with a perfect split);
  wait     the mean time a block waits for a row block of h;
  tail     the mean time a block idles at the end;
  loss     end / work - 1.

Units are k-steps. Halving the down tiles (--split 2) models split-K pieces of them.
    python3 bench/fused_mlp_schedule_model.py [--M 2048 --D 4096 --H 11008 --epi 3 --split 1]

It models no memory traffic. On the H200 the real timeline (bench/fused_mlp_trace.sh) put the
schedule's loss at ~1.6% rather than 6%, and the changes the model favoured (other ticket orders,
K pieces of the last down tiles) ran 3-9% slower: they cost the weights' L2 reuse and add traffic
(bench/results/2026-11-29-H200-suite-trace-split.md).
"""
import argparse
import heapq
import random


def tickets(mt, nt1, nt2, ng):
    gm = (mt + ng - 1) // ng

    def phase(nt, kind):
        out = []
        for t in range(mt * nt):
            g = t // (gm * nt)
            local = t - g * gm * nt
            gs = min(gm, mt - g * gm)
            out.append((kind, g * gm + local % gs, local // gs))
        return out

    return phase(nt1, 1) + phase(nt2, 2)


def simulate(order, cost, grid, jitter, rng):
    free = [(rng.uniform(0, 2), b) for b in range(grid)]
    heapq.heapify(free)
    row_done, finish = {}, [0.0] * grid
    wait = work = 0.0
    for kind, m, _ in order:
        t, b = heapq.heappop(free)
        start = t if kind == 1 else max(t, row_done[m])
        wait += start - t
        d = cost[kind] * (1 + rng.gauss(0, jitter))
        work += d
        finish[b] = start + d
        if kind == 1:
            row_done[m] = max(row_done.get(m, 0.0), finish[b])
        heapq.heappush(free, (finish[b], b))
    end = max(finish)
    return end, work / grid, wait / grid, sum(end - f for f in finish) / grid


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--M", type=int, default=2048)
    p.add_argument("--D", type=int, default=4096)
    p.add_argument("--H", type=int, default=11008)
    p.add_argument("--grid", type=int, default=132)
    p.add_argument("--epi", type=float, default=3.0, help="epilogue cost in k-steps")
    p.add_argument("--split", type=int, default=1, help="pieces per down tile (split-K)")
    p.add_argument("--jitter", type=float, default=0.03)
    p.add_argument("--trials", type=int, default=20)
    a = p.parse_args()
    mt, nt1, nt2 = -(-a.M // 128), -(-a.H // 128), -(-a.D // 256)
    cost = {1: a.D / 64 + a.epi, 2: a.H / 64 / a.split + a.epi}
    rng = random.Random(1)
    for ng in (1, 2, 4):
        order = [t for t in tickets(mt, nt1, nt2, ng) for _ in range(a.split if t[0] == 2 else 1)]
        runs = [simulate(order, cost, a.grid, a.jitter, rng) for _ in range(a.trials)]
        end, work, wait, tail = (sum(r[i] for r in runs) / len(runs) for i in range(4))
        print(f"NG={ng}: end {end:.0f}  work {work:.0f}  wait {wait:.1f}  tail {tail:.1f}  "
              f"loss {end / work - 1:+.3f}")


if __name__ == "__main__":
    main()
