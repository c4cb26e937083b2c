#!/usr/bin/env python3
# Does torch's extension build change a kernel's speed? Times one torch export's kernel (launches
# back to back, CUDA events, inputs of the benchmark shape) as `kiln export` builds it, and built
# again without torch.utils.cpp_extension's COMMON_NVCC_FLAGS (-D__CUDA_NO_HALF_OPERATORS__ and
# friends, --expt-relaxed-constexpr): kiln compiles with NVRTC and none of them.
# Usage (GPU machine): python3 bench/torch_build_probe.py EXPORT_DIR
import importlib
import json
import os
import sys

import torch
import torch.utils.cpp_extension as ce

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pytorch_baselines as pb  # noqa: E402

folder = sys.argv[1]
with open(os.path.join(folder, "target", "target.json")) as f:
    spec = json.load(f)
with open(os.path.join(folder, "kiln-export.json")) as f:
    record = json.load(f)
name = spec["name"]
sys.path.insert(0, folder)
module = importlib.import_module(name)
shape = spec["shapes"]["benchmark"]
t_dtype = pb.torch_dtype(torch, record["dtype"], None)
inputs, names, _ = pb.build_inputs(torch, spec, shape, t_dtype, "cuda", seed=7)
inferred = {d for a in spec["args"] if a.get("role") == "input" for d in a["shape"]}
kwargs = {d: shape[d] for d in spec["dims"] if d not in inferred}
fn = getattr(module, name)


def per_call_us(n=50):
    for _ in range(5):
        fn(*inputs, **kwargs)
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(n):
        fn(*inputs, **kwargs)
    stop.record()
    torch.cuda.synchronize()
    return start.elapsed_time(stop) * 1000.0 / n


module._ext()
print(f"{name}: torch's flags {ce.COMMON_NVCC_FLAGS}: {per_call_us():.2f} us per call", flush=True)
ce.COMMON_NVCC_FLAGS[:] = []
module._EXT = None
module._ext()
print(f"{name}: without them: {per_call_us():.2f} us per call", flush=True)
