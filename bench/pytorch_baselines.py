#!/usr/bin/env python3
# PyTorch baselines for kiln's targets: for each target, builds inputs at the benchmark shape of
# targets/<name>/target.json and times PyTorch eager, torch.compile(mode="default") and
# torch.compile(mode="max-autotune-no-cudagraphs") on exactly the target's computation, with
# kiln's timing method (L2 flushed before every sample, CUDA events around one call, samples
# until the relative IQR is below 0.5% or a cap; median and IQR reported). Eager is also checked
# against the target's own fp64 reference (reference.cpp, compiled with the system C++ compiler)
# at its smoke shape, and each compiled version against eager at the benchmark shape.
#
# Each target runs in its own child process with a deadline, so a slow compile cannot overrun the
# caller's wall limit: a compile that would start too late is "skipped (time)", and a child still
# running at its deadline is killed (what it finished is kept).
#
# Run on the GPU machine (python3 with torch and triton), from the repository root:
#   python3 bench/pytorch_baselines.py --targets rmsnorm,softmax --out /tmp/pytorch.json
# Options: --dtype f16|bf16|f32, --targets-dir DIR, --target-budget-s S (per target),
# --deadline-s S (all targets), --shape K=V,.. (override dims), --reps N (most samples per timing),
# --flush-mb MB, --no-compile, --profile (list each call's kernels),
# --device cpu (only to exercise the script without a GPU: host-timed, not comparable).
import argparse
import contextlib
import ctypes
import datetime
import hashlib
import json
import math
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)

# Targets whose target.json may not exist yet: minimal specs with the shapes of the anchor table
# in docs/gpu.md (H100, fp16). Used only when targets/<name>/target.json is missing, and marked.
FALLBACK_SPECS = {
    "matmul": {
        "name": "matmul",
        "dims": ["M", "N", "K"],
        "args": [
            {"name": "A", "role": "input", "dtype": "T", "shape": ["M", "K"]},
            {"name": "B", "role": "input", "dtype": "T", "shape": ["K", "N"]},
            {"name": "C", "role": "output", "dtype": "T", "shape": ["M", "N"]},
        ],
        "shapes": {"benchmark": {"M": 4096, "N": 4096, "K": 4096}},
    },
    "rotary_embedding": {
        "name": "rotary_embedding",
        "dims": ["B", "H", "L", "D", "R"],
        "args": [
            {"name": "x", "role": "input", "dtype": "T", "shape": ["B", "H", "L", "D"]},
            {"name": "cos", "role": "input", "dtype": "T", "shape": ["L", "R"]},
            {"name": "sin", "role": "input", "dtype": "T", "shape": ["L", "R"]},
            {"name": "y", "role": "output", "dtype": "T", "shape": ["B", "H", "L", "D"]},
        ],
        "shapes": {"benchmark": {"B": 2, "H": 32, "L": 2048, "D": 128, "R": 64}},
    },
    "cross_entropy": {
        "name": "cross_entropy",
        "dims": ["M", "V"],
        "args": [
            {"name": "logits", "role": "input", "dtype": "T", "shape": ["M", "V"]},
            {"name": "labels", "role": "input", "dtype": "i64", "shape": ["M"], "index_bound": "V"},
            {"name": "loss", "role": "output", "dtype": "f32", "shape": ["M"]},
        ],
        "shapes": {"benchmark": {"M": 8192, "V": 32768}},
    },
    "layernorm": {
        "name": "layernorm",
        "dims": ["M", "N"],
        "args": [
            {"name": "x", "role": "input", "dtype": "T", "shape": ["M", "N"]},
            {"name": "w", "role": "input", "dtype": "T", "shape": ["N"]},
            {"name": "b", "role": "input", "dtype": "T", "shape": ["N"]},
            {"name": "y", "role": "output", "dtype": "T", "shape": ["M", "N"]},
            {"name": "eps", "role": "scalar", "type": "f32", "value": 1e-5},
        ],
        "shapes": {"benchmark": {"M": 8192, "N": 4096}},
    },
    "flash_attention": {
        "name": "flash_attention",
        "dims": ["B", "H", "L", "D", "MASK"],
        "args": [
            {"name": "q", "role": "input", "dtype": "T", "shape": ["B", "H", "L", "D"]},
            {"name": "k", "role": "input", "dtype": "T", "shape": ["B", "H", "L", "D"]},
            {"name": "v", "role": "input", "dtype": "T", "shape": ["B", "H", "L", "D"]},
            {"name": "o", "role": "output", "dtype": "T", "shape": ["B", "H", "L", "D"]},
        ],
        "shapes": {"benchmark": {"B": 1, "H": 32, "L": 2048, "D": 128, "MASK": 2}},
    },
    "fused_mlp": {
        "name": "fused_mlp",
        "dims": ["M", "D", "H"],
        "args": [
            {"name": "x", "role": "input", "dtype": "T", "shape": ["M", "D"]},
            {"name": "w1", "role": "input", "dtype": "T", "shape": ["D", "H"]},
            {"name": "w3", "role": "input", "dtype": "T", "shape": ["D", "H"]},
            {"name": "w2", "role": "input", "dtype": "T", "shape": ["H", "D"]},
            {"name": "y", "role": "output", "dtype": "T", "shape": ["M", "D"]},
        ],
        "shapes": {"benchmark": {"M": 2048, "D": 4096, "H": 11008}},
    },
    "rmsnorm": {
        "name": "rmsnorm",
        "dims": ["M", "N"],
        "args": [
            {"name": "x", "role": "input", "dtype": "T", "shape": ["M", "N"]},
            {"name": "w", "role": "input", "dtype": "T", "shape": ["N"]},
            {"name": "y", "role": "output", "dtype": "T", "shape": ["M", "N"]},
            {"name": "eps", "role": "scalar", "type": "f32", "value": 1e-6},
        ],
        "shapes": {"benchmark": {"M": 8192, "N": 8192}},
    },
    "softmax": {
        "name": "softmax",
        "dims": ["M", "N"],
        "args": [
            {"name": "x", "role": "input", "dtype": "T", "shape": ["M", "N"]},
            {"name": "y", "role": "output", "dtype": "T", "shape": ["M", "N"]},
        ],
        "shapes": {"benchmark": {"M": 8192, "N": 8192}},
    },
    "reduce": {
        "name": "reduce",
        "dims": ["M", "N"],
        "args": [
            {"name": "x", "role": "input", "dtype": "T", "shape": ["M", "N"]},
            {"name": "y", "role": "output", "dtype": "T", "shape": ["M"]},
        ],
        "shapes": {"benchmark": {"M": 16384, "N": 4096}},
    },
}
DEFAULT_TARGETS = ["rmsnorm", "softmax", "reduce", "layernorm", "rotary_embedding",
                   "cross_entropy", "matmul", "flash_attention", "fused_mlp"]

SEMANTICS = {
    "rmsnorm": "y = x * rsqrt(mean(x^2, -1) + eps) * w, in fp32, cast to T once",
    "softmax": "y = softmax(x, -1)",
    "reduce": "y = x.sum(-1) (fp32 accumulation inside torch), output dtype as target.json",
    "layernorm": "F.layer_norm(x, (N,), w, b, eps)",
    "rotary_embedding": "y[..,:R] = x1*cos - x2*sin; y[..,R:] = x2*cos + x1*sin (x1 = x[..,:R], x2 = x[..,R:])",
    "cross_entropy": "F.cross_entropy(logits, labels, reduction='none')",
    "matmul": "A @ B (eager: cuBLAS)",
    "flash_attention": "F.scaled_dot_product_attention(q, k, v, is_causal, scale)",
    "fused_mlp": "(F.silu(x @ w1) * (x @ w3)) @ w2",
}

IMPL_EAGER = "eager"
IMPL_DEFAULT = "torch.compile default"
IMPL_MAX = "torch.compile max-autotune-no-cudagraphs"


def log(msg):
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%H:%M:%S")
    print(f"[pytorch_baselines {stamp}] {msg}", file=sys.stderr, flush=True)


def write_json(path, obj):
    d = os.path.dirname(os.path.abspath(path))
    os.makedirs(d, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=d, prefix=".tmp-", suffix=".json")
    with os.fdopen(fd, "w") as f:
        json.dump(obj, f, indent=2, sort_keys=False)
        f.write("\n")
    os.replace(tmp, path)


def load_spec(targets_dir, name):
    """(spec dict, folder or None, where the shape came from)."""
    path = os.path.join(targets_dir, name, "target.json")
    if os.path.exists(path):
        with open(path) as f:
            return json.load(f), os.path.dirname(path), os.path.relpath(path, REPO) if path.startswith(REPO) else path
    if name in FALLBACK_SPECS:
        return FALLBACK_SPECS[name], None, "fallback: shapes of docs/gpu.md (no target.json yet)"
    raise KeyError(f"no target.json for '{name}' under {targets_dir} and no fallback spec")


def benchmark_shape(spec, override):
    """The spec's benchmark shape, with --shape K=V,... applied to the dims the target has."""
    shape = dict(spec["shapes"]["benchmark"])
    for item in filter(None, (override or "").split(",")):
        k, v = item.split("=")
        if k in shape:
            shape[k] = int(v)
    return shape


def eval_dim_expr(expr, shape):
    """index_bound-style expressions of the dims (muparser subset that Python also reads)."""
    env = dict(shape)
    env.update({"cdiv": lambda a, b: -(-a // b), "idiv": lambda a, b: a // b,
                "min": min, "max": max, "pow2": lambda x: 1 << int(x)})
    return int(eval(str(expr), {"__builtins__": {}}, env))  # expressions come from target.json


# ---------------------------------------------------------------------------------------------
# Everything below needs torch; it is imported in the child processes only.


def torch_dtype(torch, name, t_dtype):
    if name == "T":
        return t_dtype
    return {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32,
            "f64": torch.float64, "i32": torch.int32, "i64": torch.int64}[name]


def build_inputs(torch, spec, shape, t_dtype, device, seed):
    """Inputs in the order of spec's input args, as torch tensors; notes on adaptations."""
    gen = torch.Generator(device=device)
    gen.manual_seed(seed)
    tensors, names, notes = [], [], []
    for a in spec["args"]:
        if a.get("role") != "input":
            continue
        dims = [shape[d] for d in a["shape"]]
        dt = torch_dtype(torch, a.get("dtype", "T"), t_dtype)
        if dt.is_floating_point:
            t = torch.randn(dims, generator=gen, device=device, dtype=torch.float32)
            if spec["name"] == "fused_mlp" and len(dims) == 2 and a["name"] != "x":
                t = t / math.sqrt(dims[0])  # keeps the f16 output in range (fan-in scaling)
            t = t.to(dt)
        else:
            bound = eval_dim_expr(a["index_bound"], shape) if a.get("index_bound") else 1 << 15
            t = torch.randint(0, max(1, bound), dims, generator=gen, device=device, dtype=torch.int64)
            if spec["name"] == "cross_entropy":
                if dt != torch.int64:
                    notes.append(f"{a['name']}: {a.get('dtype')} in kiln; passed to torch as int64 "
                                 "(F.cross_entropy needs int64), converted outside the timed region")
            else:
                t = t.to(dt)
        tensors.append(t)
        names.append(a["name"])
    return tensors, names, notes


def scalar_value(spec, name, default):
    for a in spec["args"]:
        if a.get("role") == "scalar" and a["name"].lower() == name:
            return float(a.get("value", default))
    return default


def arg_dims(spec, name):
    for a in spec["args"]:
        if a["name"] == name:
            return a["shape"]
    return None


def output_arg(spec):
    return [a for a in spec["args"] if a.get("role") == "output"][0]


def make_impls(torch, spec, shape, t_dtype, names):
    """Returns ({impl name: fn(*inputs)} for the eager variants, the function torch.compile gets,
    notes). The eager entry named IMPL_EAGER is the same function that is compiled."""
    F = torch.nn.functional
    name = spec["name"]
    out_dt = torch_dtype(torch, output_arg(spec).get("dtype", "T"), t_dtype)
    notes = []
    idx = {n: i for i, n in enumerate(names)}

    def pick(*wanted):
        """Indices of inputs by name, else by position when the count matches."""
        if all(w in idx for w in wanted):
            return [idx[w] for w in wanted]
        if len(names) != len(wanted):
            raise ValueError(f"{name}: inputs {names}, expected {list(wanted)}: no PyTorch formulation")
        notes.append(f"inputs {names} taken by position as {list(wanted)}")
        return list(range(len(wanted)))

    def mm(a, b, a_dims, b_dims):
        # Contract a's last dim with b's matching dim; b stored [K, N] or [N, K].
        if b_dims is None or b_dims[0] == a_dims[-1]:
            return a @ b
        return a @ b.t()

    variants = {}
    if name == "rmsnorm":
        eps = scalar_value(spec, "eps", 1e-6)
        n = shape[arg_dims(spec, names[0])[-1]]

        def fn(x, w):
            xf = x.float()
            return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * w.float()).to(out_dt)
        if hasattr(F, "rms_norm"):
            variants["eager (F.rms_norm)"] = lambda x, w: F.rms_norm(x, (n,), w, eps)
    elif name == "softmax":
        def fn(x):
            return torch.softmax(x, -1)
    elif name == "reduce":
        def fn(x):
            return x.sum(-1) if out_dt == x.dtype else x.sum(-1, dtype=out_dt)
    elif name == "layernorm":
        eps = scalar_value(spec, "eps", 1e-5)
        n = shape[arg_dims(spec, names[0])[-1]]

        def fn(x, w, b):
            return F.layer_norm(x, (n,), w, b, eps)
    elif name == "rotary_embedding":
        ix, ic, isn = pick("x", "cos", "sin")
        x_dims, c_dims = arg_dims(spec, names[ix]), arg_dims(spec, names[ic])
        d = shape[x_dims[-1]]
        r = shape[c_dims[-1]]
        # cos/sin [L, R] broadcast over x's other axes: size L where x has that dim, else 1.
        view = [shape[dn] if dn in c_dims[:-1] else 1 for dn in x_dims[:-1]] + [r]
        interleaved = "interleav" in spec.get("description", "").lower()
        if interleaved:
            notes.append("interleaved pairs (x[2i], x[2i+1]), from the target's description")
        if r * 2 != d and r != d:
            raise ValueError(f"rotary: cos last dim {r} is neither D/2 nor D (D={d})")

        def fn(*t):
            x, c, s = t[ix], t[ic].view(view), t[isn].view(view)
            if r == d:  # cos/sin given over all of D (rotate_half form); halves repeat
                c, s = c[..., : d // 2], s[..., : d // 2]
            if interleaved:
                x1, x2 = x[..., 0::2], x[..., 1::2]
                y = torch.stack([x1 * c - x2 * s, x2 * c + x1 * s], -1).flatten(-2)
            else:
                x1, x2 = x[..., : d // 2], x[..., d // 2:]
                y = torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], -1)
            return y if y.dtype == out_dt else y.to(out_dt)
    elif name == "cross_entropy":
        il, ib = pick("logits", "labels")
        if out_dt != t_dtype:
            notes.append(f"kiln's loss is {output_arg(spec).get('dtype')}; torch returns the logits' dtype "
                         f"({str(t_dtype).replace('torch.', '')}), timed without a cast")

        def fn(*t):
            return F.cross_entropy(t[il], t[ib], reduction="none")
    elif name == "matmul":
        ia, ib = pick("a", "b") if "a" in idx else pick("A", "B")
        a_dims, b_dims = arg_dims(spec, names[ia]), arg_dims(spec, names[ib])

        def fn(*t):
            y = mm(t[ia], t[ib], a_dims, b_dims)
            return y if y.dtype == out_dt else y.to(out_dt)
    elif name == "flash_attention":
        iq, ik, iv = pick("q", "k", "v")
        q_dims = arg_dims(spec, names[iq])
        if "CAUSAL" in shape:
            causal = bool(shape["CAUSAL"])
        elif "MASK" in shape:
            causal = shape["MASK"] == 2  # kiln: MASK 1 = none, 2 = causal
        else:
            causal = True
            notes.append("no CAUSAL/MASK dim in the spec: causal assumed (docs/gpu.md)")
        scale = scalar_value(spec, "scale", None)
        # SDPA wants [..., H, L, D]; transpose when the spec stores [B, L, H, D].
        swap = "H" in q_dims and "L" in q_dims and q_dims.index("L") < q_dims.index("H")

        def fn(*t):
            q, k, v = t[iq], t[ik], t[iv]
            if swap:
                q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
            o = F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale)
            return o.transpose(1, 2) if swap else o
        try:
            from torch.nn.attention import SDPBackend, sdpa_kernel
            for label, backend in (("flash", "FLASH_ATTENTION"), ("efficient", "EFFICIENT_ATTENTION"),
                                   ("cudnn", "CUDNN_ATTENTION")):
                if hasattr(SDPBackend, backend):
                    def forced(*t, _b=getattr(SDPBackend, backend)):
                        with sdpa_kernel([_b]):
                            return fn(*t)
                    variants[f"eager (SDPA {label} forced)"] = forced
        except ImportError:
            pass
    elif name == "fused_mlp":
        ix, i1, i3, i2 = pick("x", "w1", "w3", "w2")
        dx, d1, d3, d2 = (arg_dims(spec, names[i]) for i in (ix, i1, i3, i2))

        def fn(*t):
            x = t[ix]
            h = F.silu(mm(x, t[i1], dx, d1)) * mm(x, t[i3], dx, d3)
            return mm(h, t[i2], [None, d1[-1] if d1[0] == dx[-1] else d1[0]], d2)
    else:
        raise KeyError(f"no PyTorch formulation for target '{name}'")
    return dict([(IMPL_EAGER, fn)] + list(variants.items())), fn, notes


def tolerance_for(spec, dtype_name):
    t = spec.get("tolerance", {}).get(dtype_name)
    if t:
        return {"rel": float(t.get("rel", 0)), "abs": float(t.get("abs", 0)), "rms": float(t.get("rms", 0))}
    return {"rel": 1e-2, "abs": 1e-3, "rms": 0.0}


def compare(torch, out, ref, tol, factor=1.0, extra_rel=0.0):
    """kiln's rule |out - ref| <= abs + rel*|ref| (+ rms * RMS(ref)), element-wise; NaN where NaN.

    A tolerance's `terms` part (docs/targets.md, "Choosing tolerances") is left out: it needs the
    reference on squared inputs, or the target's own kiln_reference_terms, and only widens the
    bound where inputs are adversarial (large, mixed in scale). These checks use the benchmark
    shape's ordinary inputs, where `rms` is the larger part, so leaving it out only makes them
    stricter than kiln.
    """
    out = out.reshape(-1).to(ref.dtype)
    ref = ref.reshape(-1)
    if out.numel() != ref.numel():
        return {"ok": False, "detail": f"{out.numel()} elements, reference has {ref.numel()}"}
    finite = torch.isfinite(ref)
    rms = float(ref[finite].pow(2).mean().sqrt()) if bool(finite.any()) else 0.0
    bound = factor * (tol["abs"] + tol["rms"] * rms + (tol["rel"] + extra_rel) * ref.abs())
    err = (out - ref).abs()
    ratio = torch.where(finite, err / bound.clamp_min(1e-30), torch.zeros_like(err))
    nonfinite_ok = bool(((out == ref) | (torch.isnan(out) & torch.isnan(ref)) | finite).all())
    worst = float(ratio.max()) if ratio.numel() else 0.0
    max_abs = float(torch.where(finite, err, torch.zeros_like(err)).max()) if err.numel() else 0.0
    return {"ok": bool(worst <= 1.0 and nonfinite_ok), "worst_error_over_bound": worst,
            "max_abs_error": max_abs, "elements": int(ref.numel()), "tolerance_factor": factor}


def check_vs_eager(torch, out, eager_out, spec, dtype_name):
    """Another implementation against eager: twice the target's tolerance, plus one unit in the
    last place when the outputs are f16/bf16 (both are rounded, independently)."""
    extra = torch.finfo(out.dtype).eps if out.dtype in (torch.float16, torch.bfloat16) else 0.0
    return compare(torch, out.detach().float(), eager_out, tolerance_for(spec, dtype_name),
                   factor=2.0, extra_rel=extra)


def reference_check(torch, spec, tdir, shape, dtype_name, t_dtype, device, impl_fns_for):
    """Eager at the smoke shape against the target's fp64 reference.cpp."""
    src = os.path.join(tdir, spec.get("reference", "reference.cpp"))
    cxx = shutil.which("c++") or shutil.which("g++") or shutil.which("clang++")
    if not cxx or not os.path.exists(src):
        return {"status": "skipped", "detail": "no C++ compiler" if not cxx else f"no {src}"}
    with open(src, "rb") as f:
        key = hashlib.sha256(f.read()).hexdigest()[:16]
    so = os.path.join(tempfile.gettempdir(), f"kiln-bench-ref-{spec['name']}-{key}.so")
    if not os.path.exists(so):
        r = subprocess.run([cxx, "-O2", "-shared", "-fPIC", "-o", so + ".tmp", src],
                           capture_output=True, text=True)
        if r.returncode != 0:
            return {"status": "failed", "detail": "compiling reference: " + r.stderr[-500:]}
        os.replace(so + ".tmp", so)
    fn_ref = ctypes.CDLL(so).kiln_reference
    fn_ref.restype = None
    inputs, names, _ = build_inputs(torch, spec, shape, t_dtype, device, seed=1234)
    impls, _, _ = impl_fns_for(shape, names)
    ins = [t.detach().to("cpu", torch.float64).contiguous() for t in inputs]
    outs_spec = [a for a in spec["args"] if a.get("role") == "output"]
    outs = [torch.zeros([shape[d] for d in a["shape"]], dtype=torch.float64) for a in outs_spec]
    scalars = [float(a.get("value", 0)) for a in spec["args"] if a.get("role") == "scalar"]
    in_ptrs = (ctypes.c_void_p * len(ins))(*[t.data_ptr() for t in ins])
    out_ptrs = (ctypes.c_void_p * len(outs))(*[t.data_ptr() for t in outs])
    dims = (ctypes.c_int64 * len(spec["dims"]))(*[shape[d] for d in spec["dims"]])
    scal = (ctypes.c_double * max(1, len(scalars)))(*(scalars or [0.0]))
    fn_ref(in_ptrs, out_ptrs, dims, scal)
    kiln_out_dt = torch_dtype(torch, outs_spec[0].get("dtype", "T"), t_dtype)
    ref = outs[0].to(kiln_out_dt).to(torch.float64)  # kiln rounds the reference to the output dtype
    tol = tolerance_for(spec, dtype_name)
    result = {"status": "ok", "shape": shape, "impls": {}}
    for label, fn in impls.items():
        try:
            y = fn(*inputs)
            extra = 0.0
            if y.dtype != kiln_out_dt and y.dtype in (torch.float16, torch.bfloat16):
                extra = torch.finfo(y.dtype).eps / 2  # torch's own output rounding
            c = compare(torch, y.detach().to("cpu", torch.float64), ref, tol, extra_rel=extra)
            if extra:
                c["note"] = f"torch output {y.dtype}: rel tolerance widened by {extra:.3g}"
            result["impls"][label] = c
        except Exception as e:  # an eager variant the device does not support
            result["impls"][label] = {"ok": False, "detail": f"{type(e).__name__}: {str(e)[:300]}"}
    return result


class Timer:
    """kiln's method (evaluator/cuda/cuda_device.cc time_launch, sandbox_child.cc): before each
    sample a buffer larger than L2 is written (a new byte value each time), then CUDA events
    around one call and a device synchronize; warm-up first; input sets rotate; sampling stops
    once min_samples are taken and IQR/median < target (checked every 5), at max_samples or
    after max_ms; samples at an SM clock below 95% of the highest seen are dropped when the clock
    can be read."""

    def __init__(self, torch, device, args):
        self.torch, self.device, self.a = torch, device, args
        self.cuda = device == "cuda"
        self.flush = None
        self.flush_us = None
        self.byte = 0
        self.clock_ok = False
        if self.cuda:
            self.flush = torch.empty(int(args.flush_mb) << 20, dtype=torch.uint8, device=device)
            self.start = torch.cuda.Event(enable_timing=True)
            self.stop = torch.cuda.Event(enable_timing=True)
            self.nvml = None
            try:  # nvidia-ml-py, when installed: the SM clock after each sample
                import pynvml
                handle = torch.cuda._get_pynvml_handler(torch.cuda.current_device())
                if pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM) > 0:
                    self.nvml = (pynvml, handle)
                    self.clock_ok = True
            except Exception:
                self.clock_ok = False
            self.pad_cycles = 0
            if args.pad_us > 0:
                torch.cuda._sleep(1000)
                torch.cuda.synchronize()
                self.start.record()
                torch.cuda._sleep(10_000_000)
                self.stop.record()
                torch.cuda.synchronize()
                per_us = 10_000_000 / (self.start.elapsed_time(self.stop) * 1000)
                self.pad_cycles = int(args.pad_us * per_us)
            # How long the flush keeps the GPU busy: host launch overhead longer than this shows
            # in the sample (the GPU runs dry between the flush and the call's kernels).
            times = []
            for _ in range(5):
                self.start.record()
                self._flush()
                self.stop.record()
                torch.cuda.synchronize()
                times.append(self.start.elapsed_time(self.stop) * 1000)
            self.flush_us = sorted(times)[2]

    def _flush(self):
        self.byte = (self.byte + 1) % 256
        self.flush.fill_(self.byte)

    def method(self):
        a = self.a
        return {"device": self.device, "flush_bytes": (int(a.flush_mb) << 20) if self.cuda else 0,
                "flush_us": self.flush_us, "warmup": a.warmup, "min_samples": a.min_reps,
                "max_samples": a.reps, "max_ms": a.max_ms, "target_noise_rel": a.target_noise,
                "noisy_rel": a.noisy_rel, "noisy_retries": a.noisy_retries,
                "input_sets": a.sets, "throttle_fraction": 0.95,
                "sm_clock_read": self.clock_ok, "pad_us": a.pad_us,
                "timer": "CUDA events around one call, device synchronize after" if self.cuda
                         else "host perf_counter (cpu test mode; not comparable)"}

    def time(self, fn, sets):
        """Times fn as kiln times a kernel. A set whose IQR is over --noisy-rel of its median is
        timed again, up to --noisy-retries more sets, and the quietest set is reported with every
        set's median beside it ("noisy": true when even that one is over the limit)."""
        best, medians = None, []
        for _ in range(1 + max(0, self.a.noisy_retries)):
            stats = self._time_once(fn, sets)
            medians.append(stats.get("median_us"))
            if best is None or stats.get("noise_rel", 0.0) < best.get("noise_rel", 0.0):
                best = stats
            if stats.get("noise_rel", 0.0) <= self.a.noisy_rel:
                break
        best["sets_timed"] = len(medians)
        best["set_medians_us"] = medians
        best["noisy"] = best.get("noise_rel", 0.0) > self.a.noisy_rel
        return best

    def _time_once(self, fn, sets):
        torch, a = self.torch, self.a
        for i in range(a.warmup):
            fn(*sets[i % len(sets)])
        self._sync()
        samples, clocks, host = [], [], []
        stop_reason = ""
        t0 = time.perf_counter()
        while True:
            args = sets[len(samples) % len(sets)]
            if self.cuda:
                self._flush()
                if self.pad_cycles:
                    torch.cuda._sleep(self.pad_cycles)
                h0 = time.perf_counter()
                self.start.record()
                fn(*args)
                self.stop.record()
                h1 = time.perf_counter()
                torch.cuda.synchronize()
                samples.append(self.start.elapsed_time(self.stop) * 1000.0)
                host.append((h1 - h0) * 1e6)
                if self.clock_ok:
                    pynvml, handle = self.nvml
                    clocks.append(float(pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM)))
            else:
                h0 = time.perf_counter()
                fn(*args)
                samples.append((time.perf_counter() - h0) * 1e6)
            n = len(samples)
            if n >= a.min_reps and (n == a.min_reps or n % 5 == 0):
                if rel_iqr(samples) < a.target_noise:
                    stop_reason = "noise"
                    break
            if n >= a.reps:
                stop_reason = "max_samples"
                break
            if (time.perf_counter() - t0) * 1000 >= a.max_ms:
                stop_reason = "max_ms"
                break
        stats = timing_stats(samples, clocks)
        stats["stop"] = stop_reason
        if host:
            stats["host_enqueue_us_median"] = quantile(sorted(host), 0.5)
            stats["launch_overhead_may_count"] = bool(self.flush_us is not None and
                                                      stats["host_enqueue_us_median"] > self.flush_us + self.a.pad_us)
        return stats

    def _sync(self):
        if self.cuda:
            self.torch.cuda.synchronize()


def quantile(sorted_vals, q):
    pos = q * (len(sorted_vals) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(sorted_vals) - 1)
    return sorted_vals[lo] + (sorted_vals[hi] - sorted_vals[lo]) * (pos - lo)


def rel_iqr(samples):
    s = sorted(samples)
    med = quantile(s, 0.5)
    return (quantile(s, 0.75) - quantile(s, 0.25)) / med if med > 0 else 0.0


def timing_stats(samples, clocks):
    """As kiln's timing_stats (evaluator/launch_and_stats.cc)."""
    kept, dropped, clock_sum = [], 0, 0.0
    max_clock = max(clocks) if clocks else 0
    for i, v in enumerate(samples):
        c = clocks[i] if i < len(clocks) else 0
        if max_clock > 0 and 0 < c < 0.95 * max_clock:
            dropped += 1
            continue
        kept.append(v)
        clock_sum += c
    kept.sort()
    if not kept:
        return {"samples": 0, "dropped_samples": dropped}
    med = quantile(kept, 0.5)
    iqr = quantile(kept, 0.75) - quantile(kept, 0.25)
    return {"median_us": med, "iqr_us": iqr, "min_us": kept[0], "samples": len(kept),
            "noise_rel": iqr / med if med > 0 else 0.0, "dropped_samples": dropped,
            "sm_clock_mhz": clock_sum / len(kept) if clocks else None}


def kernel_names(torch, fn, args):
    """CUDA kernels one call launches (torch.profiler), to show what ran."""
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA]) as p:
        fn(*args)
        torch.cuda.synchronize()
    names = []
    for e in p.events():
        if str(getattr(e, "device_type", "")).endswith("CUDA"):
            names.append(e.name)
    uniq = []
    for n in names:
        if n not in uniq:
            uniq.append(n)
    return {"launches": len(names), "names": [n[:160] for n in uniq[:12]]}


def env_info(torch, device):
    info = {"python": platform.python_version(), "torch": torch.__version__,
            "torch_cuda": torch.version.cuda, "host": platform.node()}
    try:
        import triton
        info["triton"] = triton.__version__
    except Exception:
        info["triton"] = None
    if device == "cuda":
        p = torch.cuda.get_device_properties(0)
        info.update({"gpu": torch.cuda.get_device_name(0), "capability": f"{p.major}.{p.minor}",
                     "sms": p.multi_processor_count, "gpu_memory_gib": round(p.total_memory / 2**30, 1),
                     "cudnn": torch.backends.cudnn.version()})
        try:
            r = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,clocks.max.sm",
                                "--format=csv,noheader"], capture_output=True, text=True, timeout=20)
            info["nvidia_smi"] = r.stdout.strip()
        except Exception as e:
            info["nvidia_smi"] = f"unavailable: {e}"
    else:
        info["gpu"] = None
        info["cpu"] = platform.processor() or platform.machine()
    return info


def run_child(a):
    """One target, in its own process: writes a.child_out after every implementation."""
    import torch
    name = a.child
    deadline = a.deadline_epoch
    device = a.device
    spec, tdir, shape_source = load_spec(a.targets_dir, name)
    t_dtype = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32}[a.dtype]
    shape = benchmark_shape(spec, a.shape)
    if a.shape:
        shape_source += f" (overridden by --shape {a.shape})"
    res = {"target": name, "shape": shape, "shape_source": shape_source, "dtype": a.dtype,
           "semantics": SEMANTICS.get(name, ""), "notes": [], "impls": {}, "env": env_info(torch, device)}
    started = time.time()

    def save():
        res["wall_s"] = round(time.time() - started, 2)
        write_json(a.child_out, res)

    def impls_for(shp, names):
        return make_impls(torch, spec, shp, t_dtype, names)

    try:
        timer = Timer(torch, device, a)
        res["method"] = timer.method()
        sets, names = [], []
        for s in range(a.sets):
            ins, names, in_notes = build_inputs(torch, spec, shape, t_dtype, device, seed=1 + s)
            sets.append(ins)
        res["notes"] += in_notes
        res["inputs"] = [{"name": n, "shape": list(t.shape), "dtype": str(t.dtype).replace("torch.", "")}
                         for n, t in zip(names, sets[0])]
        eager_fns, compile_fn, notes = impls_for(shape, names)
        res["notes"] += notes
    except Exception as e:  # e.g. a target.json this script has no formulation for
        res["error"] = f"{type(e).__name__}: {str(e)[:500]}"
        res["traceback_tail"] = traceback.format_exc()[-1500:]
        log(f"{name}: {res['error']}")
        save()
        return 1
    save()

    if tdir and not a.no_reference_check and spec.get("shapes", {}).get("smoke"):
        try:
            res["reference_check"] = reference_check(torch, spec, tdir, dict(spec["shapes"]["smoke"][0]),
                                                     a.dtype, t_dtype, device, impls_for)
        except Exception as e:
            res["reference_check"] = {"status": "failed", "detail": f"{type(e).__name__}: {str(e)[:300]}"}
    else:
        res["reference_check"] = {"status": "skipped", "detail": "no target folder" if not tdir else
                                  "--no-reference-check" if a.no_reference_check else "no smoke shape"}
    save()

    eager_out = None
    sdpa_outs = {}
    for label, fn in eager_fns.items():
        entry = {"kind": "eager", "status": "ok"}
        res["impls"][label] = entry
        try:
            out = fn(*sets[0])
            timer._sync()
            entry["output_dtype"] = str(out.dtype).replace("torch.", "")
            if name == "flash_attention":
                sdpa_outs[label] = out.detach().clone()
            if label == IMPL_EAGER:
                eager_out = out.detach().float()
            elif eager_out is not None:
                entry["check_vs_eager"] = check_vs_eager(torch, out, eager_out, spec, a.dtype)
            entry["timing"] = timer.time(fn, sets)
            if device == "cuda" and a.profile:
                try:
                    entry["kernels"] = kernel_names(torch, fn, sets[0])
                except Exception as e:
                    entry["kernels"] = {"error": f"{type(e).__name__}: {str(e)[:200]}"}
            log(f"{name}: {label}: {entry['timing'].get('median_us', float('nan')):.2f} us")
        except Exception as e:
            entry["status"] = "failed"
            entry["error"] = f"{type(e).__name__}: {str(e)[:500]}"
            log(f"{name}: {label}: failed: {entry['error'][:200]}")
        save()
    if sdpa_outs.get(IMPL_EAGER) is not None:
        # The backend SDPA chose by itself: the forced backends whose output is bit-identical.
        same = [lbl.split("SDPA ")[1].split(" forced")[0] for lbl, o in sdpa_outs.items()
                if lbl != IMPL_EAGER and torch.equal(o, sdpa_outs[IMPL_EAGER])]
        res["impls"][IMPL_EAGER]["sdpa_backend"] = " or ".join(same) if same else "none of the forced ones (math?)"
        sdpa_outs.clear()
        save()

    modes = [] if a.no_compile else [(IMPL_DEFAULT, "default", a.reserve_default_s),
                                      (IMPL_MAX, "max-autotune-no-cudagraphs", a.reserve_max_s)]
    for label, mode, reserve in modes:
        entry = {"kind": "compile", "mode": mode, "status": "ok"}
        res["impls"][label] = entry
        left = deadline - time.time()
        if left < reserve:
            entry["status"] = "skipped (time)"
            entry["detail"] = f"{left:.0f} s left before the target's deadline, {reserve:.0f} s reserved for this compile"
            log(f"{name}: {label}: skipped (time): {entry['detail']}")
            save()
            continue
        try:
            torch._dynamo.reset()
            cfn = torch.compile(compile_fn, mode=mode, dynamic=False)
            c0 = time.time()
            out = cfn(*sets[0])
            timer._sync()
            entry["compile_s"] = round(time.time() - c0, 2)
            cfn(*sets[1 % len(sets)])  # the other input set must not recompile
            timer._sync()
            entry["output_dtype"] = str(out.dtype).replace("torch.", "")
            if eager_out is not None:
                entry["check_vs_eager"] = check_vs_eager(torch, out, eager_out, spec, a.dtype)
            entry["timing"] = timer.time(cfn, sets)
            if device == "cuda" and a.profile:
                try:
                    entry["kernels"] = kernel_names(torch, cfn, sets[0])
                except Exception as e:
                    entry["kernels"] = {"error": f"{type(e).__name__}: {str(e)[:200]}"}
            log(f"{name}: {label}: {entry['timing'].get('median_us', float('nan')):.2f} us "
                f"(compile {entry['compile_s']} s)")
        except Exception as e:
            entry["status"] = "failed"
            entry["error"] = f"{type(e).__name__}: {str(e)[:800]}"
            entry["traceback_tail"] = traceback.format_exc()[-1500:]
            log(f"{name}: {label}: failed: {entry['error'][:200]}")
        save()
    return 0


def run_parent(a):
    targets = [t for t in a.targets.split(",") if t] if a.targets else list(DEFAULT_TARGETS)
    started = time.time()
    overall = started + a.deadline_s if a.deadline_s > 0 else float("inf")
    out = {"tool": "bench/pytorch_baselines.py", "command": [sys.executable] + sys.argv,
           "date_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
           "dtype": a.dtype, "device": a.device, "targets_dir": a.targets_dir,
           "env": None, "method": None, "targets": {}}
    write_json(a.out, out)
    for name in targets:
        entry = {"target": name}
        try:
            spec, _, shape_source = load_spec(a.targets_dir, name)
            entry.update({"shape": benchmark_shape(spec, a.shape), "shape_source": shape_source})
        except Exception as e:
            entry.update({"status": "failed", "error": str(e)})
            out["targets"][name] = entry
            write_json(a.out, out)
            log(f"{name}: {e}")
            continue
        budget = min(a.target_budget_s, overall - time.time())
        if budget < a.min_target_s:
            entry.update({"status": "skipped (time)",
                          "detail": f"{max(0.0, budget):.0f} s left of --deadline-s {a.deadline_s}"})
            out["targets"][name] = entry
            write_json(a.out, out)
            log(f"{name}: skipped (time)")
            continue
        child_out = a.out + f".{name}.partial.json"
        if os.path.exists(child_out):
            os.remove(child_out)
        cmd = [sys.executable, os.path.abspath(__file__), "--child", name, "--child-out", child_out,
               "--deadline-epoch", str(time.time() + budget), "--dtype", a.dtype,
               "--targets-dir", a.targets_dir, "--device", a.device, "--reps", str(a.reps),
               "--min-reps", str(a.min_reps), "--max-ms", str(a.max_ms), "--warmup", str(a.warmup),
               "--target-noise", str(a.target_noise), "--sets", str(a.sets), "--flush-mb", str(a.flush_mb),
               "--pad-us", str(a.pad_us), "--reserve-default-s", str(a.reserve_default_s),
               "--reserve-max-s", str(a.reserve_max_s)]
        cmd += ["--shape", a.shape] if a.shape else []
        cmd += ["--no-compile"] * a.no_compile + ["--profile"] * a.profile
        cmd += ["--no-reference-check"] * a.no_reference_check
        log(f"{name}: {entry['shape']} ({shape_source}), budget {budget:.0f} s")
        t0 = time.time()
        proc = subprocess.Popen(cmd, start_new_session=True)
        killed = False
        try:
            rc = proc.wait(timeout=budget + a.grace_s)
        except subprocess.TimeoutExpired:
            killed = True
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)  # the child and its compile workers
            rc = proc.wait()
        if os.path.exists(child_out):
            with open(child_out) as f:
                res = json.load(f)
            os.remove(child_out)
        else:
            res = {"impls": {}}
        entry.update(res)
        entry["status"] = "ok" if rc == 0 else ("killed at the deadline" if killed else f"child exit {rc}")
        entry["child_wall_s"] = round(time.time() - t0, 2)
        if killed:
            for label in (IMPL_EAGER, IMPL_DEFAULT, IMPL_MAX):
                e = entry["impls"].setdefault(label, {"kind": "compile" if "compile" in label else "eager"})
                if e.get("status") in (None, "ok") and "timing" not in e:
                    e["status"] = "skipped (time)"
                    e["detail"] = "the target's child was killed at its deadline"
        if out["env"] is None and res.get("env"):
            out["env"], out["method"] = res["env"], res.get("method")
        entry.pop("env", None)
        out["targets"][name] = entry
        write_json(a.out, out)
    out["wall_s"] = round(time.time() - started, 2)
    write_json(a.out, out)
    log(f"wrote {a.out}")
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__ or "PyTorch baselines for kiln's targets")
    p.add_argument("--targets", default="", help="comma-separated (default: all nine)")
    p.add_argument("--dtype", default="f16", choices=["f16", "bf16", "f32"])
    p.add_argument("--out", default="pytorch_baselines.json")
    p.add_argument("--targets-dir", default=os.path.join(REPO, "targets"))
    p.add_argument("--shape", default="", help="override benchmark dims, e.g. M=1024,N=1024 (tests)")
    p.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    p.add_argument("--reps", type=int, default=400, help="most timed samples (kiln: 400)")
    p.add_argument("--min-reps", type=int, default=30, help="fewest timed samples (kiln: 30)")
    p.add_argument("--max-ms", type=float, default=1000, help="sampling wall-time cap (kiln: 1000)")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--target-noise", type=float, default=0.005, help="stop at this IQR/median")
    p.add_argument("--noisy-rel", type=float, default=0.02,
                   help="a set whose IQR/median is above this is timed again: a baseline is what kiln's "
                        "times are divided by, so a noisy one is not taken as it comes")
    p.add_argument("--noisy-retries", type=int, default=2,
                   help="at most this many more sets for a noisy one; the quietest is reported")
    p.add_argument("--sets", type=int, default=2, help="input sets the samples rotate over")
    p.add_argument("--flush-mb", type=int, default=256, help="L2 flush buffer written before each sample")
    p.add_argument("--pad-us", type=float, default=0,
                   help="spin the GPU this long after the flush (hides host launch overhead)")
    p.add_argument("--target-budget-s", type=float, default=300, help="wall time for one target")
    p.add_argument("--deadline-s", type=float, default=0, help="wall time for all targets (0: none)")
    p.add_argument("--min-target-s", type=float, default=20, help="skip a target with less time left")
    p.add_argument("--reserve-default-s", type=float, default=20,
                   help="start torch.compile default only with this much of the target's budget left")
    p.add_argument("--reserve-max-s", type=float, default=60,
                   help="start max-autotune only with this much of the target's budget left")
    p.add_argument("--grace-s", type=float, default=15, help="after the deadline, before the kill")
    p.add_argument("--no-compile", action="store_true")
    p.add_argument("--profile", action="store_true",
                   help="list the CUDA kernels each call runs (torch.profiler, after its timing)")
    p.add_argument("--no-reference-check", action="store_true")
    p.add_argument("--child", help=argparse.SUPPRESS)
    p.add_argument("--child-out", help=argparse.SUPPRESS)
    p.add_argument("--deadline-epoch", type=float, help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.child:
        return run_child(a)
    return run_parent(a)


if __name__ == "__main__":
    sys.exit(main())
