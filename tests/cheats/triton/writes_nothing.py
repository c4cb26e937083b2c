# docs/threats.md row 1: computes nothing and writes nothing, betting that the output buffer
# already holds the answer. Caught by the every-element-written check (poisoned outputs).
import triton
import triton.language as tl


@triton.jit
def rmsnorm_seed(x, w, y, M, N, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for c in range(0, N, BLOCK):
        cols = c + tl.arange(0, BLOCK)
        acc += tl.load(x + row * N + cols, mask=cols < N, other=0.0).to(tl.float32)
