# docs/threats.md row 11 (reading memory it never wrote): before writing each output element it
# reads that element's old bits and lets their lowest bit flip the result's lowest bit (one ulp,
# finite results only). Within tolerance, but what it writes depends on what the buffer held:
# caught by the determinism stage (the same inputs under another poison pattern).
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
        r = (v * inv * g).to(y.dtype.element_ty)
        old = tl.load(y + row * N + cols, mask=m, other=0.0)
        if y.dtype.element_ty == tl.float32:
            flipped = (r.to(tl.int32, bitcast=True) ^ (old.to(tl.int32, bitcast=True) & 1)).to(tl.float32, bitcast=True)
        else:
            flipped = (r.to(tl.int16, bitcast=True) ^ (old.to(tl.int16, bitcast=True) & 1)).to(y.dtype.element_ty, bitcast=True)
        rf = r.to(tl.float32)
        tl.store(y + row * N + cols, tl.where(rf - rf == 0.0, flipped, r), mask=m)
