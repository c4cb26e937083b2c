# softmax template (Triton). One program per row; fp32 arithmetic.
#   BLOCK      columns per chunk (a power of two)
#   ROW_CACHE  1: a row of at most BLOCK columns is read once and kept in registers (max, sum and
#              output from one load); longer rows take the chunked three-pass loop either way
#   num_warps: Triton's warps per program (a template parameter too)
import triton
import triton.language as tl


@triton.jit
def softmax(x, y, M, N, BLOCK: tl.constexpr, ROW_CACHE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    xr = x + row * N
    yr = y + row * N
    if ROW_CACHE and N <= BLOCK:
        cols = tl.arange(0, BLOCK)
        m_ok = cols < N
        v = tl.load(xr + cols, mask=m_ok, other=float("-inf")).to(tl.float32)
        m = tl.max(v, axis=0)
        e = tl.where(m_ok, tl.exp(v - m), 0.0)
        tl.store(yr + cols, (e / tl.sum(e, axis=0)).to(y.dtype.element_ty), mask=m_ok)
    else:
        mx = tl.full([BLOCK], float("-inf"), tl.float32)
        for c in range(0, N, BLOCK):
            cols = c + tl.arange(0, BLOCK)
            v = tl.load(xr + cols, mask=cols < N, other=float("-inf")).to(tl.float32)
            mx = tl.maximum(mx, v)
        m = tl.max(mx, axis=0)
        acc = tl.zeros([BLOCK], dtype=tl.float32)
        for c in range(0, N, BLOCK):
            cols = c + tl.arange(0, BLOCK)
            v = tl.load(xr + cols, mask=cols < N, other=float("-inf")).to(tl.float32)
            acc += tl.where(cols < N, tl.exp(v - m), 0.0)
        inv = 1.0 / tl.sum(acc, axis=0)
        for c in range(0, N, BLOCK):
            cols = c + tl.arange(0, BLOCK)
            v = tl.load(xr + cols, mask=cols < N, other=0.0).to(tl.float32)
            tl.store(yr + cols, (tl.exp(v - m) * inv).to(y.dtype.element_ty), mask=cols < N)
