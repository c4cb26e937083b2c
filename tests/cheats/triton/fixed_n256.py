# docs/threats.md row 12 (shape specialization): the row length is hard-coded to 256, the smoke
# shape; other widths are wrong. Caught by the shape sweep.
import triton
import triton.language as tl


@triton.jit
def rmsnorm_seed(x, w, y, M, N, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, 256)
    v = tl.load(x + row * N + cols).to(tl.float32)
    inv = 1.0 / tl.sqrt(tl.sum(v * v, axis=0) / 256 + eps)
    g = tl.load(w + cols).to(tl.float32)
    tl.store(y + row * N + cols, (v * inv * g).to(y.dtype.element_ty))
