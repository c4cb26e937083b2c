#!/usr/bin/env python3
# The table of bench/gemm_ncu.sh's output: one row per profiled kernel launch of each
# ncu-TARGET-SIDE.csv in DIR (ncu --csv --page raw), in launch order.
#   python3 bench/gemm_ncu_summary.py DIR
import csv
import glob
import os
import sys


def num(s):
    try:
        return float(s.replace(",", ""))
    except ValueError:
        return float("nan")


def rows(path):
    lines = [line for line in open(path) if line.startswith('"')]  # ncu's own notes start with ==
    table = list(csv.reader(lines))
    if len(table) < 3:
        return
    header = table[0]
    for r in table[2:]:  # table[1] holds the units
        yield dict(zip(header, r))


def main():
    folder = sys.argv[1] if len(sys.argv) > 1 else "."
    print("| file | kernel | grid | µs | SM clock MHz | tensor pipe % | SM cycles active min / avg / max "
          "(of elapsed) | L2 bytes GB | DRAM bytes GB |")
    print("|---|---|---|---|---|---|---|---|---|")
    for path in sorted(glob.glob(os.path.join(folder, "ncu-*.csv"))):
        for d in rows(path):
            g = lambda k: num(d.get(k, "nan"))  # noqa: E731
            elapsed = g("sm__cycles_elapsed.max")
            active = [g("sm__cycles_active." + s) for s in ("min", "avg", "max")]
            print("| %s | %s | %s | %.1f | %.0f | %.1f | %s (%.0fk) | %.3f | %.3f |" % (
                os.path.basename(path)[4:-4], d.get("Kernel Name", "?")[:48], d.get("Grid Size", "?"),
                g("gpu__time_duration.sum") / 1e3, g("sm__cycles_elapsed.avg.per_second") / 1e6,
                g("sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed"),
                " / ".join("%.1fk" % (a / 1e3) for a in active), elapsed / 1e3,
                g("lts__t_bytes.sum") / 1e9, g("dram__bytes.sum") / 1e9))
    return 0


if __name__ == "__main__":
    sys.exit(main())
