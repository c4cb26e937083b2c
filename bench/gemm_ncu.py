#!/usr/bin/env python3
# The driver that bench/gemm_ncu.sh runs under Nsight Compute: kiln's torch export of one target
# and PyTorch eager on the same inputs (bench/pytorch_baselines.py builds both), each called
# --calls times after the warm-up call that checks their outputs against each other, each call in
# an NVTX range named "kiln" or "eager" so that ncu profiles one side at a time
# (--nvtx --nvtx-include "kiln/"). `kiln export` has verified the kernel already.
#   python3 bench/gemm_ncu.py EXPORT_DIR [--calls 2]
import argparse
import importlib
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pytorch_baselines as pb  # noqa: E402
from same_call_compare import kiln_call, read_export  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("export")
    ap.add_argument("--calls", type=int, default=2)
    a = ap.parse_args()
    import torch

    folder = os.path.abspath(a.export)
    record, spec = read_export(folder)
    name = spec["name"]
    t_dtype = pb.torch_dtype(torch, record["dtype"], None)
    shape = pb.benchmark_shape(spec, "")
    sys.path.insert(0, folder)
    module = importlib.import_module(name)
    module._ext()
    inputs, names, _ = pb.build_inputs(torch, spec, shape, t_dtype, "cuda", seed=7)
    eager_fns, _, _ = pb.make_impls(torch, spec, shape, t_dtype, names)
    eager = eager_fns[pb.IMPL_EAGER]
    kiln = kiln_call(torch, spec, shape, t_dtype, getattr(module, name), inputs)
    ours = kiln().float()
    theirs = eager(*inputs).float()
    err = ((ours - theirs).abs().max() / theirs.abs().max()).item()
    print(f"{name} {shape} {record['dtype']}: max |kiln - eager| / max |eager| = {err:.2e}", flush=True)
    if not err < 1e-2:
        raise SystemExit("kiln and eager disagree")
    torch.cuda.synchronize()
    for label, fn in (("kiln", kiln), ("eager", lambda: eager(*inputs))):
        for _ in range(a.calls):
            torch.cuda.nvtx.range_push(label)
            fn()
            torch.cuda.synchronize()
            torch.cuda.nvtx.range_pop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
