#!/usr/bin/env python3
"""Per-shape figures of a shape-sweep run (kiln run --shapes), for the step-12 benchmark.

Usage: bench/sweep_summary.py RUN_FOLDER TARGET [--ref M=4096,N=4096,K=4096] [--single FILE]
                              [--table FILE] [--pytorch FILE] [--json OUT] [--md OUT]

From RUN_FOLDER/results.jsonl, per shape (population) of TARGET: the best verified time and its
configuration, the evaluations of that population, and the evaluations it took to come within 5%
of its final best (results in the order they arrived, re-times not counted). --ref names the
shape whose best configuration is "the single configuration" applied everywhere; --single is a
JSON file {shape label: median us or null} of that configuration timed at each shape (kiln eval
--params ... --shape ...), --table one of the same form for the dispatch table's entry at each
shape timed right before it (so that the two compare in the same GPU state), --pytorch one {shape label: {impl: median us}} from the PyTorch
baselines. Prints a markdown table (and writes it to --md) and the figures as JSON (--json).
"""
import argparse
import collections
import json
import pathlib


def label(shape):
    """A row's shape: "M=64,N=1024" as results.jsonl writes it (or a dim -> size object)."""
    if isinstance(shape, dict):
        return ",".join(f"{d}={v}" for d, v in shape.items())
    return shape


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("run")
    ap.add_argument("target")
    ap.add_argument("--ref", default="")
    ap.add_argument("--single", default="")
    ap.add_argument("--table", default="")
    ap.add_argument("--pytorch", default="")
    ap.add_argument("--json", default="")
    ap.add_argument("--md", default="")
    a = ap.parse_args()
    rows = [json.loads(l) for l in open(pathlib.Path(a.run) / "results.jsonl") if l.strip()]
    rows = [r for r in rows if r.get("target") == a.target and r.get("shape")]
    by = collections.OrderedDict()
    for r in sorted(rows, key=lambda r: r.get("at_s", 0)):
        by.setdefault(label(r["shape"]), []).append(r)
    single = json.load(open(a.single)) if a.single else {}
    table_us = json.load(open(a.table)) if a.table else {}
    torch = json.load(open(a.pytorch)) if a.pytorch else {}
    out = {}
    for shape, rs in by.items():
        evals = [r for r in rs if not r.get("retime")]
        ok = [r for r in evals if r.get("outcome") == "verified" and not r["timing"].get("stopped_early")]
        if not ok:
            out[shape] = {"evaluations": len(evals)}
            continue
        best = min(ok, key=lambda r: r["timing"]["median_us"])
        best_us = best["timing"]["median_us"]
        to5 = next(i + 1 for i, r in enumerate(evals)
                   if r.get("outcome") == "verified" and r["timing"]["median_us"] <= 1.05 * best_us)
        seed = next((r["timing"]["median_us"] for r in evals if r.get("kind") == "seed"), None)
        out[shape] = {"best_us": best_us, "params": best.get("params", {}), "evaluations": len(evals),
                      "evaluations_to_5pct": to5, "seed_us": seed,
                      "transfer_children": sum(1 for r in evals if str(r.get("op", "")).startswith("transfer"))}
    ref = out.get(a.ref, {}).get("params") if a.ref else None
    impls = sorted({k for v in torch.values() for k in v})
    lines = ["| shape | kiln best µs | configuration | evals | evals to 5% | single config µs | "
             "single / best |" + (" table µs | single / table |" if table_us else "") +
             "".join(f" {i} µs (/ kiln) |" for i in impls)]
    lines.append("|" + "---|" * (7 + (2 if table_us else 0) + len(impls)))
    for shape, f in out.items():
        if "best_us" not in f:
            lines.append(f"| {shape} | - | - | {f['evaluations']} | - | - | - |" +
                         " - |" * ((2 if table_us else 0) + len(impls)))
            continue
        cfg = ",".join(f"{k}={v}" for k, v in sorted(f["params"].items()))
        s = single.get(shape)
        s_txt = f"{s:.1f}" if isinstance(s, (int, float)) else ("cannot run" if shape in single else "-")
        gain = f"{s / f['best_us']:.2f}x" if isinstance(s, (int, float)) else "-"
        cells = []
        if table_us:
            t = table_us.get(shape)
            ok = isinstance(t, (int, float))
            cells.append(f"{t:.1f}" if ok else "-")
            cells.append(f"{s / t:.2f}x" if ok and isinstance(s, (int, float)) else "-")
        for impl in impls:
            t = torch.get(shape, {}).get(impl)
            cells.append(f"{t:.1f} ({t / f['best_us']:.2f}x)" if isinstance(t, (int, float)) else "-")
        lines.append(f"| {shape} | {f['best_us']:.1f} | `{cfg}` | {f['evaluations']} | {f['evaluations_to_5pct']} | "
                     f"{s_txt} | {gain} |" + "".join(f" {c} |" for c in cells))
    table = "\n".join(lines)
    if ref:
        table += "\n\nsingle configuration (the best at " + a.ref + "): `" + ",".join(
            f"{k}={v}" for k, v in sorted(ref.items())) + "`"
    print(table)
    if a.md:
        pathlib.Path(a.md).write_text(table + "\n")
    if a.json:
        pathlib.Path(a.json).write_text(json.dumps({"shapes": out, "single_config": ref, "single_us": single,
                                                    "table_us": table_us,
                                                    "pytorch_us": torch}, indent=1))


if __name__ == "__main__":
    main()
