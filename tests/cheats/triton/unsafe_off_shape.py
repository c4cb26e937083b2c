# docs/threats.md row 17 (hostile values reach one shape): right at the first sweep shape (64 x
# 1024), and everywhere else it clamps its inputs to +-50 -- harmless for well-scaled inputs,
# wrong for large magnitudes and infinities. Caught by the adversarial values at other shapes.
import triton
import triton.language as tl


@triton.jit
def rmsnorm_seed(x, w, y, M, N, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    clamp = (M != 64) | (N != 1024)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for c in range(0, N, BLOCK):
        cols = c + tl.arange(0, BLOCK)
        v = tl.load(x + row * N + cols, mask=cols < N, other=0.0).to(tl.float32)
        v = tl.where(clamp, tl.minimum(tl.maximum(v, -50.0), 50.0), v)
        acc += v * v
    inv = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / N + eps)
    for c in range(0, N, BLOCK):
        cols = c + tl.arange(0, BLOCK)
        m = cols < N
        v = tl.load(x + row * N + cols, mask=m, other=0.0).to(tl.float32)
        v = tl.where(clamp, tl.minimum(tl.maximum(v, -50.0), 50.0), v)
        g = tl.load(w + cols, mask=m, other=0.0).to(tl.float32)
        tl.store(y + row * N + cols, (v * inv * g).to(y.dtype.element_ty), mask=m)
