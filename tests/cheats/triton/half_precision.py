# docs/threats.md row 10 (precision downgrade): whatever the dtype, rounds x, w and the scale
# through fp16, as a kernel reading half the bytes would. Timed in f32, caught at once (smoke).
import triton
import triton.language as tl


@triton.jit
def rmsnorm_seed(x, w, y, M, N, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for c in range(0, N, BLOCK):
        cols = c + tl.arange(0, BLOCK)
        v = tl.load(x + row * N + cols, mask=cols < N, other=0.0).to(tl.float16).to(tl.float32)
        acc += v * v
    inv = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / N + eps)
    for c in range(0, N, BLOCK):
        cols = c + tl.arange(0, BLOCK)
        m = cols < N
        v = tl.load(x + row * N + cols, mask=m, other=0.0).to(tl.float16).to(tl.float32)
        g = tl.load(w + cols, mask=m, other=0.0).to(tl.float16).to(tl.float32)
        tl.store(y + row * N + cols, (v * inv * g).to(y.dtype.element_ty), mask=m)
