# docs/threats.md row 12 (right only at friendly shapes): works in whole chunks of 256 columns
# and has no tail. Every smoke, sweep and benchmark width of rmsnorm is a multiple of 256, so only
# the edge shapes (N = 1, 3, 65, 1031, 4099, also adversarial shapes) expose it: the tail stays
# unwritten.
import triton
import triton.language as tl


@triton.jit
def rmsnorm_seed(x, w, y, M, N, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    full = N // 256 * 256
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for c in range(0, full, BLOCK):
        cols = c + tl.arange(0, BLOCK)
        v = tl.load(x + row * N + cols, mask=cols < full, other=0.0).to(tl.float32)
        acc += v * v
    inv = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / N + eps)
    for c in range(0, full, BLOCK):
        cols = c + tl.arange(0, BLOCK)
        m = cols < full
        v = tl.load(x + row * N + cols, mask=m, other=0.0).to(tl.float32)
        g = tl.load(w + cols, mask=m, other=0.0).to(tl.float32)
        tl.store(y + row * N + cols, (v * inv * g).to(y.dtype.element_ty), mask=m)
