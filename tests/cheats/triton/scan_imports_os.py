# docs/threats.md row 5: imports os (a host side effect at import: it could read files or start
# processes while Triton compiles it). Refused by the static scan before anything is imported.
import os
import triton
import triton.language as tl


@triton.jit
def rmsnorm_seed(x, w, y, M, N, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for c in range(0, N, BLOCK):
        cols = c + tl.arange(0, BLOCK)
        v = tl.load(x + row * N + cols, mask=cols < N, other=0.0).to(tl.float32)
        acc += v * v
    inv = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / N + eps)
    for c in range(0, N, BLOCK):
        cols = c + tl.arange(0, BLOCK)
        m = cols < N
        v = tl.load(x + row * N + cols, mask=m, other=0.0).to(tl.float32)
        g = tl.load(w + cols, mask=m, other=0.0).to(tl.float32)
        tl.store(y + row * N + cols, (v * inv * g).to(y.dtype.element_ty), mask=m)
