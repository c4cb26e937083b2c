# docs/threats.md row 19: reads the GPU's %globaltimer through inline PTX (a kernel that watches
# the clock can behave differently while timed). No banned name in the Python; the scan of
# Triton's PTX refuses the compile.
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
    t = tl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l", [], dtype=tl.int64, is_pure=False, pack=1)
    inv = inv + (t * 0).to(tl.float32)
    for c in range(0, N, BLOCK):
        cols = c + tl.arange(0, BLOCK)
        m = cols < N
        v = tl.load(x + row * N + cols, mask=m, other=0.0).to(tl.float32)
        g = tl.load(w + cols, mask=m, other=0.0).to(tl.float32)
        tl.store(y + row * N + cols, (v * inv * g).to(y.dtype.element_ty), mask=m)
