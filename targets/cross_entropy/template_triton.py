# cross_entropy template (Triton). One program per row; fp32; the seed's formula.
#   BLOCK      columns per chunk (a power of two)
#   ROW_CACHE  1: a row of at most BLOCK logits is read once and kept in registers; longer rows
#              take the chunked two-pass loop either way
#   num_warps: Triton's warps per program (a template parameter too)
import triton
import triton.language as tl


@triton.jit
def cross_entropy(logits, labels, loss, M, V, BLOCK: tl.constexpr, ROW_CACHE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    xr = logits + row * V
    if ROW_CACHE and V <= BLOCK:
        cols = tl.arange(0, BLOCK)
        v = tl.load(xr + cols, mask=cols < V, other=float("-inf")).to(tl.float32)
        m = tl.max(v, axis=0)
        total = tl.sum(tl.where(cols < V, tl.exp(v - m), 0.0), axis=0)
    else:
        mx = tl.full([BLOCK], float("-inf"), tl.float32)
        for c in range(0, V, BLOCK):
            cols = c + tl.arange(0, BLOCK)
            v = tl.load(xr + cols, mask=cols < V, other=float("-inf")).to(tl.float32)
            mx = tl.maximum(mx, v)
        m = tl.max(mx, axis=0)
        acc = tl.zeros([BLOCK], dtype=tl.float32)
        for c in range(0, V, BLOCK):
            cols = c + tl.arange(0, BLOCK)
            v = tl.load(xr + cols, mask=cols < V, other=float("-inf")).to(tl.float32)
            acc += tl.where(cols < V, tl.exp(v - m), 0.0)
        total = tl.sum(acc, axis=0)
    label = tl.load(labels + row).to(tl.int64)
    ok = (label >= 0) & (label < V)
    picked = tl.load(xr + label, mask=ok, other=0.0).to(tl.float32)
    result = (m + tl.log(total)) - picked
    tl.store(loss + row, tl.where(ok, result, float("nan")))
