#!/usr/bin/env python3
# The driver that bench/gemm_ncu.sh runs under Nsight Compute: kiln's torch export of one target
# and PyTorch eager on the same inputs (bench/pytorch_baselines.py builds both), each called
# --calls times after the warm-up call that checks their outputs against each other, each call in
# an NVTX range named "kiln" or "eager" so that ncu profiles one side at a time
# (--nvtx --nvtx-include "kiln/"). `kiln export` has verified the kernel already.
#   python3 bench/gemm_ncu.py EXPORT_DIR [--calls 2]
import argparse
import importlib
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pytorch_baselines as pb  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("export")
    ap.add_argument("--calls", type=int, default=2)
    a = ap.parse_args()
    import torch

    folder = os.path.abspath(a.export)
    with open(os.path.join(folder, "kiln-export.json")) as f:
        record = json.load(f)
    with open(os.path.join(folder, "target", "target.json")) as f:
        spec = json.load(f)
    name = spec["name"]
    t_dtype = pb.torch_dtype(torch, record["dtype"], None)
    shape = pb.benchmark_shape(spec, "")
    sys.path.insert(0, folder)
    module = importlib.import_module(name)
    module._ext()
    kiln_fn = getattr(module, name)
    inputs, names, _ = pb.build_inputs(torch, spec, shape, t_dtype, "cuda", seed=7)
    eager_fns, _, _ = pb.make_impls(torch, spec, shape, t_dtype, names)
    eager = eager_fns[pb.IMPL_EAGER]
    in_args = [x for x in spec["args"] if x.get("role") == "input"]
    inferred = {d for x in in_args for d in x["shape"]}
    kwargs = {d: shape[d] for d in spec["dims"] if d not in inferred}
    ours = kiln_fn(*inputs, **kwargs).float()
    theirs = eager(*inputs).float()
    err = ((ours - theirs).abs().max() / theirs.abs().max()).item()
    print(f"{name} {shape} {record['dtype']}: max |kiln - eager| / max |eager| = {err:.2e}", flush=True)
    if not err < 1e-2:
        raise SystemExit("kiln and eager disagree")
    torch.cuda.synchronize()
    for label, fn in (("kiln", lambda: kiln_fn(*inputs, **kwargs)), ("eager", lambda: eager(*inputs))):
        for _ in range(a.calls):
            torch.cuda.nvtx.range_push(label)
            fn()
            torch.cuda.synchronize()
            torch.cuda.nvtx.range_pop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
