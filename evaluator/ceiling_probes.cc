// The probe kernels whose timings give a device's ceilings (evaluator/ceilings.cc). Kept apart
// from the measuring code: they are sources compiled at run time, by NVRTC or the host compiler.
#include "evaluator/ceiling_probes.h"

namespace kiln::eval {

// Copy-rate probe: a grid-stride copy of 16-byte vectors.
const char* const kCopyProbeCuda = R"(
extern "C" __global__ void kiln_copy(const uint4* __restrict__ src, uint4* __restrict__ dst,
                                     long long n) {
  const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n;
       i += stride) {
    dst[i] = src[i];
  }
}
)";

const char* const kMatrixRateProbeCuda = R"PROBE(
// Tensor-core rate probe (sm_90a): each warpgroup issues wgmma m64n128k16 (f16 in, f32
// accumulate) from shared-memory tiles in a loop; the values do not matter, only the issue rate.
#include <cuda_fp16.h>

__device__ __forceinline__ unsigned long long kiln_desc(const void* p) {
  unsigned addr = static_cast<unsigned>(__cvta_generic_to_shared(p));
  unsigned long long desc = (addr & 0x3FFFF) >> 4;
  desc |= static_cast<unsigned long long>(128 >> 4) << 16;  // leading byte offset
  desc |= static_cast<unsigned long long>(256 >> 4) << 32;  // stride byte offset
  return desc;                                              // no swizzle
}

__device__ __forceinline__ void kiln_wgmma(float (&d)[64], unsigned long long da,
                                           unsigned long long db) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
      "}, %64, %65, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
        "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
        "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
        "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "l"(da), "l"(db), "r"(1));
}

extern "C" __global__ void __launch_bounds__(128) kiln_mma_probe(float* out, long long iters) {
  __shared__ __align__(128) __half a_tile[64 * 16];
  __shared__ __align__(128) __half b_tile[16 * 128];
  for (int i = threadIdx.x; i < 64 * 16; i += 128) a_tile[i] = __float2half(0.01f * (i % 7 + 1));
  for (int i = threadIdx.x; i < 16 * 128; i += 128) b_tile[i] = __float2half(0.01f * (i % 5 + 1));
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  __syncthreads();
  float d[64];
#pragma unroll
  for (int i = 0; i < 64; ++i) d[i] = 0.f;
  const unsigned long long da = kiln_desc(a_tile), db = kiln_desc(b_tile);
  for (long long it = 0; it < iters; ++it) {
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
    kiln_wgmma(d, da, db);
    kiln_wgmma(d, da, db);
    kiln_wgmma(d, da, db);
    kiln_wgmma(d, da, db);
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
    asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
  }
  float s = 0.f;
#pragma unroll
  for (int i = 0; i < 64; ++i) s += d[i];
  if (threadIdx.x == 0) out[blockIdx.x] = s;
}
)PROBE";

// The attainable GEMM. Why kiln's own kernel rather than cuBLAS: the figure must be timed exactly
// as candidates are (the sandbox child's "time" op: its L2 flush, its median), which only a
// kernel loaded through that op gets; cuBLAS would need a new op in the child, a library the
// machine may lack, and launches kiln does not see. Why mma.sync and not wgmma: it is a kernel
// any sm_80+ GPU runs, whose fragment layouts are fixed by the PTX ISA (a wgmma GEMM needs
// swizzled-descriptor and TMA plumbing that is easy to get subtly wrong), and the figure is for
// reporting, not a bound: it only has to be what a good hand-written kernel reaches. On an H100
// that is below cuBLAS (which uses wgmma): see docs/evaluator.md for what it measures.
const char* const kAttainableGemmCuda = R"GEMM(
// Attainable-rate GEMM (sm_80 and later): C[M][N] = A[M][K] * B[N][K]^T in f16, accumulated in
// f32 by mma.sync m16n8k16. Both operands are K-major ("TN"), the layout tensor cores read
// natively. Each 256-thread block computes a 128x256 tile of C from 64-wide K slices that
// cp.async streams into a KILN_GEMM_STAGES-deep ring of shared-memory stages; each of its 8 warps
// owns a 64x64 sub-tile (128 f32 accumulators a thread) and reads its fragments with ldmatrix
// from rows whose 16-byte chunks are XOR-swizzled by row, so neither the stores nor the reads
// conflict on shared-memory banks. M must be a multiple of 128, N of 256 and K of 64.
#include <cuda_fp16.h>

#ifndef KILN_GEMM_STAGES
#define KILN_GEMM_STAGES 3
#endif

namespace {

constexpr int kBM = 128, kBN = 256, kBK = 64, kThreads = 256;
constexpr int kStages = KILN_GEMM_STAGES;
constexpr unsigned kATileBytes = kBM * kBK * 2;
constexpr unsigned kStageBytes = kATileBytes + kBN * kBK * 2;

// Byte offset of 16-byte chunk `chunk` (0..7) of tile row `row` (128 bytes a row).
__device__ __forceinline__ unsigned swizzle(int row, int chunk) {
  return static_cast<unsigned>(row) * 128u + (static_cast<unsigned>(chunk ^ (row & 7)) << 4);
}

__device__ __forceinline__ void cp_async16(unsigned dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(src) : "memory");
}

__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}

template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}

__device__ __forceinline__ void ldmatrix_x4(unsigned (&r)[4], unsigned addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

__device__ __forceinline__ void mma16816(float (&d)[4], const unsigned (&a)[4], unsigned b0,
                                         unsigned b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Copies the K slice starting at k0 of the block's A rows (m0..m0+127) and B rows (n0..n0+255)
// into the stage at `stage` (a shared address): 8 chunks a row, 12 chunks a thread.
__device__ __forceinline__ void load_stage(unsigned stage, const __half* A, const __half* B,
                                           long long K, long long m0, long long n0, long long k0,
                                           int tid) {
#pragma unroll
  for (int i = 0; i < kBM * 8 / kThreads; ++i) {
    const int idx = tid + i * kThreads, row = idx >> 3, chunk = idx & 7;
    cp_async16(stage + swizzle(row, chunk), A + (m0 + row) * K + k0 + chunk * 8);
  }
#pragma unroll
  for (int i = 0; i < kBN * 8 / kThreads; ++i) {
    const int idx = tid + i * kThreads, row = idx >> 3, chunk = idx & 7;
    cp_async16(stage + kATileBytes + swizzle(row, chunk), B + (n0 + row) * K + k0 + chunk * 8);
  }
}

}  // namespace

// Grid: (N / 256, M / 128); block: 256 threads; dynamic shared memory: KILN_GEMM_STAGES * 48 KiB.
extern "C" __global__ void __launch_bounds__(256, 1)
    kiln_gemm(const __half* __restrict__ A, const __half* __restrict__ B, __half* __restrict__ C,
              long long M, long long N, long long K) {
  extern __shared__ __align__(128) unsigned char smem[];
  const unsigned base = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int warp_m = warp >> 2, warp_n = warp & 3;  // 2 x 4 warps of 64 x 64
  const long long m0 = static_cast<long long>(blockIdx.y) * kBM;
  const long long n0 = static_cast<long long>(blockIdx.x) * kBN;
  const int ktiles = static_cast<int>(K / kBK);
  if (m0 >= M || n0 >= N) return;

  float acc[4][8][4];
#pragma unroll
  for (int mi = 0; mi < 4; ++mi)
#pragma unroll
    for (int ni = 0; ni < 8; ++ni)
#pragma unroll
      for (int r = 0; r < 4; ++r) acc[mi][ni][r] = 0.f;

#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < ktiles) load_stage(base + s * kStageBytes, A, B, K, m0, n0, s * kBK, tid);
    cp_async_commit();
  }

  // ldmatrix.x4 takes the row addresses of its four 8x8 matrices from lanes 0-7, 8-15, 16-23 and
  // 24-31. For A (16 rows x 16 k of a fragment) the matrices are rows 0-7 / 8-15 at k 0-7, then
  // at k 8-15: registers a0..a3 of mma's A fragment. For B (stored as rows n, 16 k wide) they are
  // n 0-7 at k 0-7 / k 8-15, then n 8-15 likewise: the b0, b1 pairs of two n8 tiles.
  const int a_row = warp_m * 64 + (lane & 15), a_half = lane >> 4;
  const int b_row = warp_n * 64 + ((lane >> 4) << 3) + (lane & 7), b_half = (lane >> 3) & 1;

  for (int kt = 0; kt < ktiles; ++kt) {
    cp_async_wait<kStages - 2>();  // slice kt has landed (this thread's part of it)
    __syncthreads();               // everyone's part; and every warp is done with slice kt - 1
    const int next = kt + kStages - 1;
    if (next < ktiles) {
      load_stage(base + (next % kStages) * kStageBytes, A, B, K, m0, n0,
                 static_cast<long long>(next) * kBK, tid);
    }
    cp_async_commit();  // possibly empty: the group count stays in step with kt
    const unsigned a_stage = base + (kt % kStages) * kStageBytes;
    const unsigned b_stage = a_stage + kATileBytes;
#pragma unroll
    for (int ks = 0; ks < kBK / 16; ++ks) {
      unsigned af[4][4], bf[8][2];
#pragma unroll
      for (int mi = 0; mi < 4; ++mi) {
        ldmatrix_x4(af[mi], a_stage + swizzle(a_row + mi * 16, ks * 2 + a_half));
      }
#pragma unroll
      for (int nj = 0; nj < 4; ++nj) {
        unsigned r[4];
        ldmatrix_x4(r, b_stage + swizzle(b_row + nj * 16, ks * 2 + b_half));
        bf[2 * nj][0] = r[0];
        bf[2 * nj][1] = r[1];
        bf[2 * nj + 1][0] = r[2];
        bf[2 * nj + 1][1] = r[3];
      }
#pragma unroll
      for (int mi = 0; mi < 4; ++mi)
#pragma unroll
        for (int ni = 0; ni < 8; ++ni) mma16816(acc[mi][ni], af[mi], bf[ni][0], bf[ni][1]);
    }
  }

  // Accumulator layout of m16n8: c0, c1 at row lane / 4, columns 2 * (lane % 4) + 0, 1; c2, c3
  // eight rows below.
  const int g = lane >> 2, t4 = lane & 3;
#pragma unroll
  for (int mi = 0; mi < 4; ++mi) {
    const long long row = m0 + warp_m * 64 + mi * 16 + g;
#pragma unroll
    for (int ni = 0; ni < 8; ++ni) {
      const long long col = n0 + warp_n * 64 + ni * 8 + t4 * 2;
      *reinterpret_cast<__half2*>(C + row * N + col) =
          __floats2half2_rn(acc[mi][ni][0], acc[mi][ni][1]);
      *reinterpret_cast<__half2*>(C + (row + 8) * N + col) =
          __floats2half2_rn(acc[mi][ni][2], acc[mi][ni][3]);
    }
  }
}
)GEMM";

// Host copy-rate probe: an L1-sized buffer copied `reps` times by a loop the compiler vectorises
// (mode 0) or by memcpy (mode 1). Each pass is a call through a volatile function pointer, which
// the compiler cannot see through, so the passes can be neither merged nor dropped (inline asm
// would say the same more cheaply, but the cpu compiler refuses asm in any source).
const char* const kCopyProbeHost = R"(
#include <cstdint>
#include <cstring>
static void copy_loop(const float* __restrict__ src, float* __restrict__ dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = src[i];
}
static void copy_memcpy(const float* __restrict__ src, float* __restrict__ dst, int64_t n) {
  std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
}
extern "C" void host_copy_probe(const float* src, float* dst, int64_t n, int64_t reps,
                                int64_t mode) {
  void (*volatile pass)(const float*, float*, int64_t) = mode == 0 ? copy_loop : copy_memcpy;
  for (int64_t r = 0; r < reps; ++r) pass(src, dst, n);
}
)";

}  // namespace kiln::eval
