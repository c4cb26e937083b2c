#!/usr/bin/env python3
# Checks kiln's torch exports against PyTorch on a GPU: for every export folder given (written by
# `kiln export T --format torch`), imports the module (which builds the extension with
# torch.utils.cpp_extension), runs it at three shapes of the target (the benchmark shape, the
# largest sweep shape and an edge shape with odd sizes) on random inputs, compares its outputs with
# the PyTorch formulation of bench/pytorch_baselines.py through torch.testing.assert_close, and
# times both the same way (L2 flushed before each sample, CUDA events around one call, medians).
#
# Usage (GPU machine, from the repository root):
#   python3 bench/torch_export_check.py --out RESULT.json EXPORT_DIR [EXPORT_DIR ...]
# Yardstick: the PyTorch op computed in fp64 on the same input values, rounded to the output dtype,
# with the target's tolerance as kiln applies it: rtol = rel, atol = abs + rms * RMS(reference)
# (rel and abs scaled when the tolerance has a "scale" expression; a "terms" part is left out, which
# only makes the check stricter: see pytorch_baselines.compare). The timing is of the PyTorch op
# in the inputs' own dtype.
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
import pytorch_baselines as pb  # noqa: E402  (its PyTorch formulations and input builder)


def shapes_for(spec):
    shapes = [dict(spec["shapes"]["benchmark"])]
    sweep = spec["shapes"].get("sweep", [])
    if sweep:
        shapes.append(max(sweep, key=lambda s: math.prod(s.values())))
    edge = [s for s in spec["shapes"].get("edge", []) if math.prod(s.values()) > 1]
    if edge:
        shapes.append(max(edge, key=lambda s: math.prod(s.values())))
    return shapes[:3]


def time_call(torch, fn, flush, reps):
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    samples = []
    for _ in range(reps):
        flush.fill_(1)
        start.record()
        fn()
        stop.record()
        torch.cuda.synchronize()
        samples.append(start.elapsed_time(stop) * 1000.0)
    return statistics.median(samples)


def check_export(torch, folder, flush, reps):
    with open(os.path.join(folder, "kiln-export.json")) as f:
        record = json.load(f)
    with open(os.path.join(folder, "target", "target.json")) as f:
        spec = json.load(f)
    name = spec["name"]
    dtype_name = record["dtype"]
    t_dtype = pb.torch_dtype(torch, dtype_name, None)
    sys.path.insert(0, folder)
    t0 = time.time()
    module = importlib.import_module(name)
    kiln_fn = getattr(module, name)
    module._ext()  # build now, outside the timings
    build_s = time.time() - t0
    inferred = {d for a in spec["args"] if a.get("role") == "input" for d in a["shape"]}
    tol = pb.tolerance_for(spec, dtype_name)
    scale_expr = spec.get("tolerance", {}).get(dtype_name, {}).get("scale")
    rows = []
    for shape in shapes_for(spec):
        row = {"shape": shape}
        try:
            inputs, names, notes = pb.build_inputs(torch, spec, shape, t_dtype, "cuda", seed=7)
            impls, torch_fn, notes2 = pb.make_impls(torch, spec, shape, t_dtype, names)
            kiln_inputs = []
            for a, t in zip([a for a in spec["args"] if a.get("role") == "input"], inputs):
                want = pb.torch_dtype(torch, a.get("dtype", "T"), t_dtype)
                kiln_inputs.append(t if t.dtype == want else t.to(want))
            kwargs = {d: shape[d] for d in spec["dims"] if d not in inferred}
            ours = kiln_fn(*kiln_inputs, **kwargs)
            # The PyTorch op on the same values in fp64, rounded to the output's dtype: kiln's own
            # yardstick (a low-precision PyTorch result differs from the exact one by its own
            # rounding, as kiln's does).
            ref = torch_fn(*[t.double() if t.is_floating_point() else t for t in inputs])
            ref = ref.to(ours.dtype).double()
            torch.cuda.synchronize()
            k = 1.0
            if scale_expr:
                k = eval(scale_expr, {"__builtins__": {}, "sqrt": math.sqrt}, dict(shape))
            finite = torch.isfinite(ref)
            rms = float(ref[finite].pow(2).mean().sqrt()) if bool(finite.any()) else 0.0
            rtol = tol["rel"] * k
            atol = tol["abs"] * k + tol["rms"] * rms
            torch.testing.assert_close(ours.double(), ref, rtol=rtol, atol=atol, equal_nan=True)
            err = (ours.double() - ref).abs()
            row.update({"assert_close": "pass", "reference": "PyTorch op in fp64, rounded to the output dtype",
                        "rtol": rtol, "atol": atol,
                        "max_abs_diff": float(err[finite].max()) if bool(finite.any()) else 0.0})
            row["kiln_us"] = time_call(torch, lambda: kiln_fn(*kiln_inputs, **kwargs), flush, reps)
            row["torch_us"] = time_call(torch, lambda: torch_fn(*inputs), flush, reps)
            row["torch_over_kiln"] = row["torch_us"] / row["kiln_us"]
            row["notes"] = notes + notes2
        except AssertionError as e:
            row.update({"assert_close": "FAIL", "detail": str(e)[:2000]})
        except Exception as e:  # a build or launch error is a failure of the export, reported
            row.update({"assert_close": "ERROR", "detail": f"{type(e).__name__}: {e}"[:2000]})
        rows.append(row)
        print(f"{name} {shape}: {row.get('assert_close')} kiln {row.get('kiln_us', 0):.2f} us, "
              f"torch {row.get('torch_us', 0):.2f} us {row.get('detail', '')[:300]}", flush=True)
    return {"target": name, "dtype": dtype_name, "params": record.get("params"),
            "candidate_id": record.get("candidate_id"), "build_s": build_s, "shapes": rows}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("exports", nargs="+")
    a = ap.parse_args()
    import torch
    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    results = {"torch": torch.__version__, "device": torch.cuda.get_device_name(), "exports": []}
    failures = 0
    for folder in a.exports:
        try:
            r = check_export(torch, folder, flush, a.reps)
        except Exception as e:
            r = {"folder": folder, "error": f"{type(e).__name__}: {e}"[:2000]}
            print(f"{folder}: ERROR {r['error'][:500]}", flush=True)
        failures += 0 if "shapes" in r and all(s["assert_close"] == "pass" for s in r["shapes"]) else 1
        results["exports"].append(r)
        pb.write_json(a.out, results)
    print(f"torch_export_check: {len(a.exports) - failures}/{len(a.exports)} exports pass at every shape", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
