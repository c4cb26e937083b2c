# docs/threats.md row 4: assumes every row's RMS is 1, as it is on average for N(0, 1) data, and
# skips the reduction: y = x * w. Caught at once (smoke).
import triton
import triton.language as tl


@triton.jit
def rmsnorm_seed(x, w, y, M, N, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    for c in range(0, N, BLOCK):
        cols = c + tl.arange(0, BLOCK)
        m = cols < N
        v = tl.load(x + row * N + cols, mask=m, other=0.0).to(tl.float32)
        g = tl.load(w + cols, mask=m, other=0.0).to(tl.float32)
        tl.store(y + row * N + cols, (v * g).to(y.dtype.element_ty), mask=m)
