# matmul seed (Triton): C[M,N] = A[M,K] @ B[K,N], all row-major; one program per BLOCK x BLOCK
# tile of C in row-major tile order, K in steps of 32 with tl.dot (fp32 accumulation), every load
# masked at the edges (zeros beyond K). Plain and obviously correct. ws (scratch) goes unused.
import triton
import triton.language as tl


@triton.jit
def matmul_seed(A, B, C, ws, M, N, K, BLOCK: tl.constexpr):
    tiles_n = tl.cdiv(N, BLOCK)
    pid = tl.program_id(0)
    rm = (pid // tiles_n).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    rn = (pid % tiles_n).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    rk = tl.arange(0, 32)
    acc = tl.zeros([BLOCK, BLOCK], dtype=tl.float32)
    for k in range(0, K, 32):
        kk = k + rk
        a = tl.load(A + rm[:, None] * K + kk[None, :], mask=(rm[:, None] < M) & (kk[None, :] < K),
                    other=0.0)
        b = tl.load(B + kk[:, None] * N + rn[None, :], mask=(kk[:, None] < K) & (rn[None, :] < N),
                    other=0.0)
        acc = tl.dot(a, b, acc)
    tl.store(C + rm[:, None] * N + rn[None, :], acc.to(C.dtype.element_ty),
             mask=(rm[:, None] < M) & (rn[None, :] < N))
