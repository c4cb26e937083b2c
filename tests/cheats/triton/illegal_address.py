# A store through a wild pointer (2^40 elements past y): the device faults with an illegal
# address, which poisons the CUDA context; the evaluator must report a crash and carry on.
import triton
import triton.language as tl


@triton.jit
def rmsnorm_seed(x, w, y, M, N, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    far = row * 0 + 1099511627776
    tl.store(y + far + tl.arange(0, BLOCK), tl.zeros([BLOCK], dtype=tl.float32).to(y.dtype.element_ty))
