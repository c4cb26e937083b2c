# matmul template (Triton): C[M,N] = A[M,K] @ B[K,N], all row-major, fp32 accumulation with
# tl.dot (wgmma on Hopper), every load masked at the edges (zeros beyond K). ws, the target's
# scratch buffer (the CUDA template's stream-K partials), goes unused.
#   BLOCK_M, BLOCK_N, BLOCK_K  the tile of C per program and the K step
#   GROUP_M    programs walk the tiles in groups of GROUP_M tile rows, column by column inside a
#              group, so the programs resident at one time share panels of A and B in L2
#   num_warps, num_stages: Triton's warps per program and software-pipeline depth
import triton
import triton.language as tl


@triton.jit
def matmul(A, B, C, ws, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
           BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    pid = tl.program_id(0)
    tiles_m = tl.cdiv(M, BLOCK_M)
    tiles_n = tl.cdiv(N, BLOCK_N)
    per_group = GROUP_M * tiles_n
    first_m = (pid // per_group) * GROUP_M
    group_m = tl.minimum(tiles_m - first_m, GROUP_M)
    tm = first_m + (pid % per_group) % group_m
    tn = (pid % per_group) // group_m
    rm = tm.to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = tn.to(tl.int64) * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        kk = k + rk
        a = tl.load(A + rm[:, None] * K + kk[None, :], mask=(rm[:, None] < M) & (kk[None, :] < K),
                    other=0.0)
        b = tl.load(B + kk[:, None] * N + rn[None, :], mask=(kk[:, None] < K) & (rn[None, :] < N),
                    other=0.0)
        acc = tl.dot(a, b, acc)
    tl.store(C + rm[:, None] * N + rn[None, :], acc.to(C.dtype.element_ty),
             mask=(rm[:, None] < M) & (rn[None, :] < N))
