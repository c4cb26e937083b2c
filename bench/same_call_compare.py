#!/usr/bin/env python3
# kiln's exported kernel against PyTorch in one process, timed in interleaved rounds, so that both
# sides see the same GPU: the same clocks, the same temperature, the same power state.
#
# Why: separate scripts time kiln (`kiln eval`) and PyTorch (bench/pytorch_baselines.py) minutes
# apart, and on 2026-11-29 two H200s ran PyTorch's samples at 1600-1750 MHz while kiln's had run at
# 1980 MHz. A ratio of two such figures says more about the machine's state than about the kernels.
# Here every round times each implementation in turn (the order rotates from round to round), with
# kiln's method for each sample: a 256 MiB buffer written before it (L2 flushed), CUDA events
# around one call, a device synchronize after. The SM clock and the throttle reasons are read after
# every sample, so a reader can see whether the two sides ran under the same conditions, and the
# host time the call took to enqueue its work (Python and launch overhead: where it exceeds the
# flush's ~60 µs of GPU work the GPU waits for the host, and the sample shows it).
#
# kiln's side is a torch export (`kiln export T --template --params P --format torch --to DIR`),
# which runs the same kernel source that `kiln eval` times. Before any timing, the export's output
# is checked against the PyTorch op computed in fp64 (rounded to the output dtype, the target's
# tolerance), and torch.compile's output against eager's (bench/pytorch_baselines.check_vs_eager).
#
# Usage (GPU machine, from the repository root):
#   python3 bench/same_call_compare.py --out RESULT.json [--rounds 12] [--per-round 15]
#       [--compile default,max-autotune-no-cudagraphs | --compile none] [--shape K=V,..]
#       [--rest-ms MS] [--pad-us US] EXPORT_DIR
# Under sustained load an H200 caps its power and its SM clock falls (1980 to 1200-1590 MHz for the
# fused MLP, NVML reason "SW power cap"); --rest-ms idles before each batch so that every batch
# starts at full clock. Both sides get the same rest. torch.compile's wrapper takes 200-340 µs of
# host time per call (kiln's export about 60): --pad-us puts a GPU sleep between the flush and the
# start event, so that the host has enqueued the call before its timing starts and only GPU time
# counts (bench/results/2026-11-29-H200-same-call.md).
# Prints a table; RESULT.json holds every sample with its round, clock and throttle reasons.
import argparse
import importlib
import json
import math
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import pytorch_baselines as pb  # noqa: E402  (PyTorch formulations, input builder, checks)


def parse_shape(text, spec):
    shape = dict(spec["shapes"]["benchmark"])
    for part in filter(None, (text or "").split(",")):
        key, _, value = part.partition("=")
        if key not in spec["dims"] or not value.isdigit():
            raise SystemExit(f"--shape: '{part}' is not DIM=N for a dim of {spec['name']} {spec['dims']}")
        shape[key] = int(value)
    return shape


def read_export(folder):
    """The export's record (kiln-export.json) and its target's spec."""
    with open(os.path.join(folder, "kiln-export.json")) as f:
        record = json.load(f)
    with open(os.path.join(folder, "target", "target.json")) as f:
        spec = json.load(f)
    return record, spec


def kiln_call(torch, spec, shape, t_dtype, kiln_fn, inputs):
    """kiln's export called on the inputs PyTorch gets: each converted to the dtype its argument
    declares, and the dims that no input's shape gives passed by name."""
    in_args = [x for x in spec["args"] if x.get("role") == "input"]
    kiln_inputs = [t if t.dtype == pb.torch_dtype(torch, x.get("dtype", "T"), t_dtype) else
                   t.to(pb.torch_dtype(torch, x.get("dtype", "T"), t_dtype)) for x, t in zip(in_args, inputs)]
    inferred = {d for x in in_args for d in x["shape"]}
    kwargs = {d: shape[d] for d in spec["dims"] if d not in inferred}
    return lambda: kiln_fn(*kiln_inputs, **kwargs)


class Clock:
    """The SM clock (MHz) and NVML's clocks-event reasons after a sample, where NVML can be read."""

    def __init__(self, torch):
        self.nvml = None
        try:
            import pynvml
            handle = torch.cuda._get_pynvml_handler(torch.cuda.current_device())
            pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM)
            self.nvml = (pynvml, handle)
        except Exception as e:  # no nvidia-ml-py: the table says the clock is unknown
            self.why = f"{type(e).__name__}: {e}"

    def read(self):
        if not self.nvml:
            return None, None
        pynvml, handle = self.nvml
        mhz = float(pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM))
        try:
            reasons = int(pynvml.nvmlDeviceGetCurrentClocksThrottleReasons(handle))
        except Exception:
            reasons = None
        return mhz, reasons


def time_samples(torch, fn, args, flush, clock, count, warmup, pad_cycles):
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(warmup):
        fn(*args)
    torch.cuda.synchronize()
    rows = []
    for _ in range(count):
        flush.add_(1)
        if pad_cycles:
            torch.cuda._sleep(pad_cycles)  # the GPU waits here while the host enqueues fn
        start.record()
        h0 = time.perf_counter()
        fn(*args)
        host_us = (time.perf_counter() - h0) * 1e6
        stop.record()
        torch.cuda.synchronize()
        mhz, reasons = clock.read()
        rows.append({"us": start.elapsed_time(stop) * 1000.0, "host_us": host_us, "mhz": mhz,
                     "reasons": reasons})
    return rows


def quartiles(values):
    v = sorted(values)
    q = lambda p: v[min(len(v) - 1, max(0, int(round(p * (len(v) - 1)))))]
    return q(0.25), q(0.5), q(0.75)


def summarize(samples, label, top_mhz):
    mine = [s for s in samples if s["impl"] == label]
    q1, med, q3 = quartiles([s["us"] for s in mine])
    clocks = [s["mhz"] for s in mine if s["mhz"]]
    at_top = [s["us"] for s in mine if s["mhz"] and top_mhz and s["mhz"] >= 0.95 * top_mhz]
    return {"samples": len(mine), "median_us": med, "iqr_rel": (q3 - q1) / med if med else None,
            "p10_us": sorted(s["us"] for s in mine)[len(mine) // 10],
            "host_enqueue_us_median": statistics.median(s["host_us"] for s in mine),
            "mhz_median": statistics.median(clocks) if clocks else None,
            "mhz_min": min(clocks) if clocks else None,
            "below_95pct_of_top_clock": sum(1 for c in clocks if c < 0.95 * top_mhz) if top_mhz else None,
            "median_us_at_top_clock": statistics.median(at_top) if at_top else None}


def main():
    ap = argparse.ArgumentParser(description="kiln's torch export against PyTorch, timed in interleaved rounds in one process")
    ap.add_argument("export", help="a folder written by `kiln export T --format torch`")
    ap.add_argument("--out", required=True)
    ap.add_argument("--rounds", type=int, default=12)
    ap.add_argument("--per-round", type=int, default=15)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--pad-us", type=float, default=0.0,
                    help="a GPU sleep of this length before each sample's start event, so that the "
                         "host's enqueue time (Python, launches) does not count")
    ap.add_argument("--rest-ms", type=float, default=0.0,
                    help="idle time before each batch, so that a power-capped GPU recovers its clock")
    ap.add_argument("--compile", default="default",
                    help="torch.compile modes, comma-separated, or 'none' (default: default)")
    ap.add_argument("--shape", default="", help="override benchmark dims, e.g. M=4096,N=4096")
    a = ap.parse_args()
    if a.rounds < 2 or a.per_round < 3:
        raise SystemExit("--rounds must be at least 2 and --per-round at least 3")
    import torch

    folder = os.path.abspath(a.export)
    record, spec = read_export(folder)
    name, dtype_name = spec["name"], record["dtype"]
    t_dtype = pb.torch_dtype(torch, dtype_name, None)
    shape = parse_shape(a.shape, spec)
    result = {"target": name, "dtype": dtype_name, "shape": shape, "params": record.get("params"),
              "torch": torch.__version__, "device": torch.cuda.get_device_name(),
              "method": {"rounds": a.rounds, "per_round": a.per_round, "warmup": a.warmup,
                         "flush_bytes": 256 << 20, "order": "rotated each round",
                         "rest_ms": a.rest_ms, "pad_us": a.pad_us,
                         "timer": "CUDA events around one call, device synchronize after"}}

    sys.path.insert(0, folder)
    t0 = time.time()
    module = importlib.import_module(name)
    kiln_fn = getattr(module, name)
    module._ext()  # built before any timing
    result["kiln_build_s"] = round(time.time() - t0, 1)

    inputs, names, notes = pb.build_inputs(torch, spec, shape, t_dtype, "cuda", seed=7)
    eager_fns, compile_fn, notes2 = pb.make_impls(torch, spec, shape, t_dtype, names)
    result["notes"] = notes + notes2
    call = kiln_call(torch, spec, shape, t_dtype, kiln_fn, inputs)
    impls = {"kiln": lambda *t: call(), "eager": eager_fns[pb.IMPL_EAGER]}

    # Correctness first: kiln against the fp64 op, every compiled version against eager.
    ours = call()
    ref = compile_fn(*[t.double() if t.is_floating_point() else t for t in inputs]).to(ours.dtype).double()
    check = pb.compare(torch, ours.detach().double(), ref, pb.tolerance_for(spec, dtype_name))
    result["checks"] = {"kiln vs fp64": check}
    del ref
    eager_out = impls["eager"](*inputs).detach().float()
    modes = [] if a.compile == "none" else [m for m in a.compile.split(",") if m]
    for mode in modes:
        label = f"torch.compile {mode}"
        torch._dynamo.reset()
        cfn = torch.compile(compile_fn, mode=mode, dynamic=False)
        c0 = time.time()
        out = cfn(*inputs)
        torch.cuda.synchronize()
        result.setdefault("compile_s", {})[label] = round(time.time() - c0, 1)
        result["checks"][f"{label} vs eager"] = pb.check_vs_eager(torch, out, eager_out, spec, dtype_name)
        impls[label] = cfn
    failed = [k for k, c in result["checks"].items() if not c.get("ok")]
    if failed:
        result["error"] = "output check failed: " + ", ".join(failed)
        pb.write_json(a.out, result)
        print(f"{name}: {result['error']}: {json.dumps(result['checks'])[:800]}", flush=True)
        return 1

    flush = torch.zeros(256 << 20, dtype=torch.uint8, device="cuda")
    pad_cycles = 0
    if a.pad_us > 0:  # cycles per µs of torch.cuda._sleep, measured once
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(1000)
        e0.record()
        torch.cuda._sleep(10_000_000)
        e1.record()
        torch.cuda.synchronize()
        pad_cycles = int(a.pad_us * 10_000_000 / (e0.elapsed_time(e1) * 1000.0))
    clock = Clock(torch)
    labels = list(impls)
    samples = []
    started = time.time()
    for r in range(a.rounds):
        order = labels[r % len(labels):] + labels[:r % len(labels)]
        for label in order:
            if a.rest_ms > 0:
                time.sleep(a.rest_ms / 1000.0)
            for s in time_samples(torch, impls[label], inputs, flush, clock, a.per_round, a.warmup,
                                      pad_cycles):
                samples.append(dict(s, impl=label, round=r))
    result["timing_wall_s"] = round(time.time() - started, 1)
    if not clock.nvml:
        result["clock_note"] = "SM clock not read: " + clock.why
    top = max((s["mhz"] for s in samples if s["mhz"]), default=None)
    result["top_mhz"] = top
    result["impls"] = {label: summarize(samples, label, top) for label in labels}
    # Paired by round: kiln's median over each other implementation's, in the same round.
    paired = {}
    for label in labels[1:]:
        ratios = []
        for r in range(a.rounds):
            k = statistics.median(s["us"] for s in samples if s["impl"] == "kiln" and s["round"] == r)
            o = statistics.median(s["us"] for s in samples if s["impl"] == label and s["round"] == r)
            ratios.append(k / o)
        paired[label] = {"median": statistics.median(ratios), "min": min(ratios), "max": max(ratios),
                         "per_round": ratios}
    result["kiln_over"] = paired
    result["samples"] = samples
    pb.write_json(a.out, result)

    print(f"{name} {dtype_name} {shape}, {a.rounds} rounds x {a.per_round} samples each, "
          f"top SM clock {top or 'unknown'} MHz")
    print("| implementation | median µs | IQR/median | SM MHz median (min) | samples below 95% of top "
          "clock | kiln / this, per round: median (min-max) |")
    print("|---|---|---|---|---|---|")
    for label in labels:
        m = result["impls"][label]
        p = paired.get(label)
        ratio = "%.3f (%.3f-%.3f)" % (p["median"], p["min"], p["max"]) if p else "-"
        mhz = "%.0f (%.0f)" % (m["mhz_median"], m["mhz_min"]) if m["mhz_median"] else "unknown"
        print("| %s | %.1f | %.2f%% | %s | %s of %d | %s |" % (
            label, m["median_us"], 100 * m["iqr_rel"], mhz, m["below_95pct_of_top_clock"],
            m["samples"], ratio))
    print("checks: " + ", ".join("%s %s (worst/bound %.3g)" % (k, "ok" if c["ok"] else "FAIL",
                                                            c.get("worst_error_over_bound", math.nan))
                                 for k, c in result["checks"].items()), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
