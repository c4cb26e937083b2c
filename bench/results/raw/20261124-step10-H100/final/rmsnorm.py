# kiln export (torch) of rmsnorm, f16, cuda sm_90a.
# Kernel: template rmsnorm with BLOCK=512 ELEMS=16 HINT=0 ROWS=1 WREG=0
# Written by kiln 0.1.0 (d288aeeff3d9). The verification record is kiln-export.json;
# `kiln verify <this folder>` re-runs the five verification stages and the timing here.
"""kiln's rmsnorm kernel for PyTorch: `from rmsnorm import rmsnorm` (this folder on sys.path).

The extension is built on first use with torch.utils.cpp_extension (cached under
TORCH_EXTENSIONS_DIR).
"""
import os

import torch
from torch.utils.cpp_extension import load

_HERE = os.path.dirname(os.path.abspath(__file__))
_EXT = None
_SCRATCH = {}


def _check(name, t, dtype, dim_names, dims, device):
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"rmsnorm: {name} must be a torch.Tensor, not {type(t).__name__}")
    if t.dtype != dtype:
        raise TypeError(f"rmsnorm: {name} is {t.dtype}; this kernel was exported for {dtype} "
                        f"(export another dtype with kiln export --dtype)")
    if t.device.type != "cuda":
        raise ValueError(f"rmsnorm: {name} is on {t.device}; this kernel runs on cuda")
    if device is not None and t.device != device:
        raise ValueError(f"rmsnorm: {name} is on {t.device}, the other tensors on {device}")
    if t.dim() != len(dim_names):
        raise ValueError(f"rmsnorm: {name} has {t.dim()} dims, expected {len(dim_names)} "
                         f"[{', '.join(dim_names)}]")
    if not t.is_contiguous():
        raise ValueError(f"rmsnorm: {name} must be contiguous (call .contiguous())")
    for i, d in enumerate(dim_names):
        if d in dims and dims[d] != t.shape[i]:
            raise ValueError(f"rmsnorm: {name}.shape[{i}] is {t.shape[i]} but {d} is {dims[d]} "
                             "from the tensors before it")
        dims[d] = int(t.shape[i])
    return t.device


def _scratch(name, device, dtype, numel):
    key = (name, device, dtype)
    buf = _SCRATCH.get(key)
    if buf is None or buf.numel() < numel:
        buf = torch.zeros(max(numel, 1), dtype=dtype, device=device)
        _SCRATCH[key] = buf
    return buf


def _ext():
    global _EXT
    if _EXT is None:
        # Build for the architecture kiln verified on (sm_90a): the kernel may use its instructions.
        saved = os.environ.get("TORCH_CUDA_ARCH_LIST")
        os.environ["TORCH_CUDA_ARCH_LIST"] = "9.0a"
        try:
            _EXT = load(name="kiln_rmsnorm_f16_direct",
                        sources=[os.path.join(_HERE, "rmsnorm.cu"), os.path.join(_HERE, "rmsnorm_binding.cpp")],
                        extra_cflags=["-O3", "-std=c++17"], extra_cuda_cflags=["-O3", "-std=c++17"])
        finally:
            if saved is None:
                os.environ.pop("TORCH_CUDA_ARCH_LIST", None)
            else:
                os.environ["TORCH_CUDA_ARCH_LIST"] = saved
    return _EXT


def rmsnorm(x, w, *, y=None, eps=9.9999999999999995e-07):
    """kiln's rmsnorm (f16): RMS normalization per row: y = x / sqrt(mean(x^2) + eps) * w.

    Inputs: x [M, N] torch.float16; w [N] torch.float16;
    Returns y [M, N] torch.float16; pass an output as a keyword to write into it.
    All tensors contiguous, on one cuda device; the launch goes on the current stream.
    """
    dims = {}
    device = None
    device = _check("x", x, torch.float16, ("M", "N", ), dims, device)
    device = _check("w", w, torch.float16, ("N", ), dims, device)
    if y is None:
        y = torch.empty((dims["M"], dims["N"], ), dtype=torch.float16, device=device)
    else:
        device = _check("y", y, torch.float16, ("M", "N", ), dims, device)
    _ext().kiln_launch(x, w, y, dims["M"], dims["N"], float(eps))
    return y
