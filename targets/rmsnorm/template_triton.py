# rmsnorm template (Triton). One program per row; fp32 accumulation.
#   BLOCK      columns per chunk (a power of two)
#   ROW_CACHE  1: a row of at most BLOCK columns is loaded once and kept in registers between the
#              sum of squares and the output (one read of x instead of two); longer rows take the
#              chunked two-pass loop either way
#   num_warps: Triton's warps per program (a template parameter too)
import triton
import triton.language as tl


@triton.jit
def rmsnorm(x, w, y, M, N, eps, BLOCK: tl.constexpr, ROW_CACHE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    xr = x + row * N
    yr = y + row * N
    if ROW_CACHE and N <= BLOCK:
        cols = tl.arange(0, BLOCK)
        m = cols < N
        v = tl.load(xr + cols, mask=m, other=0.0).to(tl.float32)
        inv = 1.0 / tl.sqrt(tl.sum(v * v, axis=0) / N + eps)
        g = tl.load(w + cols, mask=m, other=0.0).to(tl.float32)
        tl.store(yr + cols, (v * inv * g).to(y.dtype.element_ty), mask=m)
    else:
        acc = tl.zeros([BLOCK], dtype=tl.float32)
        for c in range(0, N, BLOCK):
            cols = c + tl.arange(0, BLOCK)
            v = tl.load(xr + cols, mask=cols < N, other=0.0).to(tl.float32)
            acc += v * v
        inv = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / N + eps)
        for c in range(0, N, BLOCK):
            cols = c + tl.arange(0, BLOCK)
            m = cols < N
            v = tl.load(xr + cols, mask=m, other=0.0).to(tl.float32)
            g = tl.load(w + cols, mask=m, other=0.0).to(tl.float32)
            tl.store(yr + cols, (v * inv * g).to(y.dtype.element_ty), mask=m)
