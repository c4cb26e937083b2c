// Measures and caches the copy bandwidth of a device, its tensor-core issue rate and the rate a
// real GEMM attains on it.
#include "evaluator/ceilings.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "evaluator/evaluation.h"
#include "evaluator/prelude.h"
#include "evaluator/tensor_data.h"
#include "evaluator/toolchain.h"
#include "shared/atomic_file.h"
#include "shared/backends.h"

namespace kiln::eval {
namespace fs = std::filesystem;
namespace {

constexpr const char* kCudaCopy = R"(
extern "C" __global__ void kiln_copy(const uint4* __restrict__ src, uint4* __restrict__ dst,
                                     long long n) {
  const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n;
       i += stride) {
    dst[i] = src[i];
  }
}
)";

constexpr const char* kCudaMmaProbe = R"PROBE(
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
constexpr const char* kCudaGemm = R"GEMM(
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
constexpr const char* kCpuCopy = R"(
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

// The host probe's buffer (each way: 16 KiB in all, inside any L1d) and passes per launch (256 MiB
// read + written: about half a millisecond at 500 GB/s).
constexpr size_t kHostCopyBytes = size_t{8} << 10;
constexpr int64_t kHostCopyPasses = 16384;
// What a cpu cache file's figure is; a file without it (an older probe's) is measured again.
constexpr const char* kHostProbeName = "l1_copy_one_core";

std::string file_key(const std::string& s) {
  std::string out;
  for (char c : s) out += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return out;
}

// Compiles and loads a probe kernel in `sandbox`; returns its handle. `what` names it in errors.
Result<nlohmann::json> load_probe(Sandbox& sandbox, Compiler& compiler, const CompileRequest& req,
                                  const fs::path& dir, const std::string& what) {
  CompileOutput out = compiler.compile(req);
  if (!out.ok) return internal_error("compiling the " + what + " failed:\n" + out.log);
  fs::create_directories(dir);
  fs::path bin = dir / (req.kernel_name + "-" + out.cache_key.substr(0, 16) +
                        (sandbox.backend() == "cuda" ? ".cubin" : ".so"));
  // Evaluators that start together share the folder: each writes the whole probe or none of it.
  KILN_RETURN_IF_ERROR(write_file_atomically(bin.string(), out.binary));
  KILN_ASSIGN_OR_RETURN(nlohmann::json loaded,
                        sandbox.call({{"op", "load"}, {"path", bin.string()}, {"kernel", req.kernel_name}}, 60000));
  if (!loaded.value("ok", false)) return internal_error("loading the " + what + ": " + loaded.dump());
  return loaded["handle"];
}

// Runs the "time" request `timing` on the loaded probe `handle` and returns the statistics of its
// samples.
Result<TimingStats> time_probe(Sandbox& sandbox, const nlohmann::json& handle,
                               const std::string& what, nlohmann::json timing) {
  timing["op"] = "time";
  timing["handle"] = handle;
  KILN_ASSIGN_OR_RETURN(nlohmann::json timed, sandbox.call(timing, 120000));
  if (!timed.value("ok", false)) return internal_error("timing the " + what + ": " + timed.dump());
  TimingStats t = timing_stats(timed["samples_us"].get<std::vector<double>>(),
                               timed["clocks_mhz"].get<std::vector<double>>(), 0.95);
  if (t.median_us <= 0) return internal_error("the " + what + " produced no samples");
  return t;
}

Result<TimingStats> run_probe(Sandbox& sandbox, Compiler& compiler, const CompileRequest& req,
                              const fs::path& dir, const std::string& what, nlohmann::json timing) {
  KILN_ASSIGN_OR_RETURN(nlohmann::json handle, load_probe(sandbox, compiler, req, dir, what));
  return time_probe(sandbox, handle, what, std::move(timing));
}

// One host core's copy rate (bytes read + written per second) at its fastest: kHostCopyBytes
// copied kHostCopyPasses times per launch with no cache flush, by the loop and by memcpy, the best
// sample of either. The arena's first kHostCopyBytes are the source.
Result<double> measure_host_copy(Sandbox& sandbox, Compiler& compiler, const fs::path& dir) {
  CompileRequest req;
  req.source = kCpuCopy;
  req.kernel_name = "host_copy_probe";  // the cpu compiler reserves kiln_* for its trampolines
  req.arch = sandbox.arch();
  req.signature = {{ArgSpec::Kind::kTensorIn, DType::kF32, "src"},
                   {ArgSpec::Kind::kTensorOut, DType::kF32, "dst"},
                   {ArgSpec::Kind::kInt64, DType::kI64, "n"},
                   {ArgSpec::Kind::kInt64, DType::kI64, "reps"},
                   {ArgSpec::Kind::kInt64, DType::kI64, "mode"}};
  const std::string what = "host copy probe";
  KILN_ASSIGN_OR_RETURN(nlohmann::json handle, load_probe(sandbox, compiler, req, dir, what));
  const size_t bytes = kHostCopyBytes;
  const auto n = static_cast<int64_t>(bytes / sizeof(float));
  double best_us = 0;
  for (int64_t mode : {0, 1}) {
    // clang-format off
    nlohmann::json timing = {
        {"grid", {1, 1, 1}}, {"block", {1, 1, 1}}, {"shared_bytes", 0},
        {"args", {{{"tensor", 0}}, {{"tensor", 1}}, {{"i64", n}}, {{"i64", kHostCopyPasses}},
                  {{"i64", mode}}}},
        {"sets", {{{{"offset", 0}, {"bytes", bytes}, {"out", false}},
                   {{"offset", bytes}, {"bytes", bytes}, {"out", true}}}}},
        {"warmup", 3}, {"min_samples", 20}, {"max_samples", 100}, {"max_ms", 250},
        {"target_noise_rel", 0.005}, {"flush_l2", false}, {"poison", 0}};
    // clang-format on
    KILN_ASSIGN_OR_RETURN(TimingStats t, time_probe(sandbox, handle, what, timing));
    if (sandbox.arena()[bytes + bytes / 2 + 7] != 0x3C) {
      return internal_error("the host copy probe did not copy its input; refusing its timing");
    }
    best_us = best_us == 0 ? t.min_us : std::min(best_us, t.min_us);
  }
  const double rate = 2.0 * static_cast<double>(bytes) * kHostCopyPasses / (best_us * 1e-6);
  // No core copies 100 TB/s: a figure like that means the passes were optimised away, and a floor
  // from it would reject nothing.
  if (!(rate > 0) || rate > 1e14) {
    return internal_error("the host copy probe measured an implausible " +
                          std::to_string(rate / 1e9) + " GB/s");
  }
  return rate;
}

std::string host_name() {
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) != 0 || host[0] == '\0') return "unknown-host";
  return host;
}

// Dense f16 tensor-core rate (flop/s) from the wgmma probe: many warpgroups per SM issuing
// m64n128k16 back to back. The floor check divides flops by it, so it must not underestimate the
// device: the probe keeps the tensor cores busy from registers and shared memory alone.
Result<double> measure_matrix_rate(Sandbox& sandbox, Compiler& compiler, const fs::path& dir) {
  CompileRequest req;
  req.source = kCudaMmaProbe;
  req.kernel_name = "kiln_mma_probe";
  req.arch = sandbox.arch();
  req.signature = {{ArgSpec::Kind::kTensorOut, DType::kF32, "out"}, {ArgSpec::Kind::kInt64, DType::kI64, "iters"}};
  constexpr int64_t kBlocks = 1056;  // 4 warpgroups on each of up to 264 SMs
  constexpr int64_t kIters = 2048;
  nlohmann::json timing = {
      {"grid", {kBlocks, 1, 1}}, {"block", {128, 1, 1}},
      {"shared_bytes", 0}, {"args", {{{"tensor", 0}}, {{"i64", kIters}}}},
      {"sets", {{{{"offset", 0}, {"bytes", kBlocks * 4}, {"out", true}}}}},
      {"warmup", 3}, {"min_samples", 10}, {"max_samples", 100}, {"max_ms", 1000},
      {"target_noise_rel", 0.005}, {"flush_l2", false}, {"poison", 0}};
  KILN_ASSIGN_OR_RETURN(TimingStats t,
                        run_probe(sandbox, compiler, req, dir, "tensor-core probe", timing));
  const double flops = 2.0 * 64 * 128 * 16 * 4 * kIters * kBlocks;
  // The best sample, not the median: the floor must never be stricter than what the device did.
  return flops / (t.min_us * 1e-6);
}

// What a cache file's attainable figure is; a file without it (an older kiln's, or another
// GEMM's) is measured again where the GEMM applies.
constexpr const char* kGemmProbeName = "mma_sync_tn_f16_gemm_4096_128x256x64_v1";

// The attainable GEMM's rate (flop/s): 4096^3 on N(0, 1) f16 data (zeros or constants can run
// faster than real data), timed as a candidate is (L2 flushed before each sample; the median,
// which is what a candidate is reported at, not the best sample), and believed only after its
// output matched host dot products. A at arena offset 0, B after it, C after B: 96 MiB.
Result<double> measure_attainable_gemm(Sandbox& sandbox, Compiler& compiler, const fs::path& dir) {
  const std::string what = "attainable GEMM";
  const int64_t n = kAttainableGemmSize;
  const size_t elems = static_cast<size_t>(n * n), in_bytes = 2 * elems;
  const size_t b_off = in_bytes, c_off = 2 * in_bytes;
  if (sandbox.arena_bytes() < 3 * in_bytes)
    return internal_error("the arena is too small for the " + what);
  unsigned char* arena = sandbox.arena();
  constexpr size_t kSlice = size_t{1} << 20;  // values generated at a time; 2 * elems is a multiple
  std::vector<double> values(kSlice);
  for (size_t done = 0, slice = 0; done < 2 * elems; done += kSlice, ++slice) {
    generate(Distribution::kNormal, DType::kF16, 0x6b696c6e00 + slice, kSlice, values.data(),
             arena + 2 * done);
  }
  const CompileRequest req = attainable_gemm_request(sandbox.arch());
  // clang-format off
  nlohmann::json timing = {
      {"grid", {n / kAttainableGemmTileN, n / kAttainableGemmTileM, 1}},
      {"block", {kAttainableGemmThreads, 1, 1}},
      {"shared_bytes", attainable_gemm_shared_bytes(sandbox.arch())},
      {"args", {{{"tensor", 0}}, {{"tensor", 1}}, {{"tensor", 2}}, {{"i64", n}}, {{"i64", n}},
                {{"i64", n}}}},
      {"sets", {{{{"offset", 0}, {"bytes", in_bytes}, {"out", false}},
                 {{"offset", b_off}, {"bytes", in_bytes}, {"out", false}},
                 {{"offset", c_off}, {"bytes", in_bytes}, {"out", true}}}}},
      {"warmup", 3}, {"min_samples", 20}, {"max_samples", 200}, {"max_ms", 300},
      {"target_noise_rel", 0.005}, {"flush_l2", true}, {"poison", 255}};
  // clang-format on
  KILN_ASSIGN_OR_RETURN(TimingStats t, run_probe(sandbox, compiler, req, dir, what, timing));

  // C of the last launch is back in the arena (each launch's output was poisoned first). Check
  // the matrix's corners and 60 random places against host dot products of the same f16 inputs:
  // a kernel that computes something else reports no rate. The tolerance allows f16 rounding of
  // the output and f32 accumulation; a wrong element is off by about the norm (~90 here).
  std::vector<double> a(n), b(n);
  uint64_t state = 0x853c49e6748fea9bULL;
  auto next = [&state, n] {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<int64_t>((state >> 33) % static_cast<uint64_t>(n));
  };
  for (int i = 0; i < 64; ++i) {
    const int64_t row = i < 4 ? (i & 1 ? n - 1 : 0) : next();
    const int64_t col = i < 4 ? (i & 2 ? n - 1 : 0) : next();
    decode(DType::kF16, arena + 2 * row * n, n, a.data());
    decode(DType::kF16, arena + b_off + 2 * col * n, n, b.data());
    double ref = 0, sum_sq = 0, got = 0;
    for (int64_t k = 0; k < n; ++k) {
      ref += a[k] * b[k];
      sum_sq += a[k] * b[k] * a[k] * b[k];
    }
    decode(DType::kF16, arena + c_off + 2 * (row * n + col), 1, &got);
    const double tol = 1e-2 * std::sqrt(sum_sq) + 2e-3 * std::abs(ref);
    if (!(std::abs(got - ref) <= tol)) {
      char buf[256];
      std::snprintf(buf, sizeof(buf),
                    "the %s computed C[%lld][%lld] = %g, expected %g (tolerance %g); refusing its "
                    "rate",
                    what.c_str(), static_cast<long long>(row), static_cast<long long>(col), got,
                    ref, tol);
      return internal_error(buf);
    }
  }
  const double rate = 2.0 * static_cast<double>(n) * n * n / (t.median_us * 1e-6);
  // No GPU does 10 PFLOP/s of dense f16 (a B200 does about 2.3).
  if (!(rate > 0) || rate > 1e16) {
    return internal_error("the " + what + " measured an implausible " +
                          std::to_string(rate / 1e12) + " TFLOP/s");
  }
  return rate;
}

int sm_number(const std::string& arch) {
  if (arch.rfind("sm_", 0) != 0) return 0;
  return std::atoi(arch.c_str() + 3);
}

}  // namespace

bool attainable_gemm_applies(const std::string& arch) { return sm_number(arch) >= 80; }

uint32_t attainable_gemm_shared_bytes(const std::string& arch) {
  const int sm = sm_number(arch);
  const bool large = sm == 80 || sm == 87 || (sm >= 90 && sm < 120);
  const uint32_t stage = (kAttainableGemmTileM + kAttainableGemmTileN) * kAttainableGemmTileK * 2;
  return (large ? 3 : 2) * stage;
}

CompileRequest attainable_gemm_request(const std::string& arch) {
  CompileRequest req;
  req.source = kCudaGemm;
  req.kernel_name = "kiln_gemm";  // kiln_*: profilers leave kiln's own kernels out
  req.arch = arch;
  const uint32_t stage = (kAttainableGemmTileM + kAttainableGemmTileN) * kAttainableGemmTileK * 2;
  req.defines["KILN_GEMM_STAGES"] = std::to_string(attainable_gemm_shared_bytes(arch) / stage);
  req.signature = {
      {ArgSpec::Kind::kTensorIn, DType::kF16, "A"},  {ArgSpec::Kind::kTensorIn, DType::kF16, "B"},
      {ArgSpec::Kind::kTensorOut, DType::kF16, "C"}, {ArgSpec::Kind::kInt64, DType::kI64, "M"},
      {ArgSpec::Kind::kInt64, DType::kI64, "N"},     {ArgSpec::Kind::kInt64, DType::kI64, "K"}};
  return req;
}

double floor_bandwidth(const Ceilings& c) {
  return c.arch == "cpu" ? kHostFloorMargin * c.bandwidth_bytes_per_s : c.bandwidth_bytes_per_s;
}

std::string ceilings_line(const Ceilings& c) {
  char buf[512];
  if (c.arch != "cpu") {
    std::snprintf(buf, sizeof(buf), "device ceilings: copy %.2f TB/s",
                  c.bandwidth_bytes_per_s / 1e12);
    std::string line = buf;
    if (c.matrix_flops_per_s > 0) {
      std::snprintf(buf, sizeof(buf), ", f16 tensor cores %.0f TFLOP/s",
                    c.matrix_flops_per_s / 1e12);
      line += buf;
    }
    if (c.attainable_flops_per_s > 0) {
      std::snprintf(buf, sizeof(buf), ", f16 GEMM attains %.0f TFLOP/s",
                    c.attainable_flops_per_s / 1e12);
      line += buf;
    }
    return line;
  }
  std::string where;
  if (c.measured) {
    std::snprintf(buf, sizeof(buf), "measured now in %.1f s, once per host", c.measure_s);
    where = buf;
    where += c.cache_file.empty() ? std::string("; not cached") : "; cached in " + c.cache_file;
  } else {
    where = "cached in " + c.cache_file + "; --remeasure measures again";
  }
  std::snprintf(
      buf, sizeof(buf),
      "host ceilings: copy %.1f GB/s on one core, L1-resident (%s); the floor allows up to "
      "%.2f TB/s (%gx that)",
      c.bandwidth_bytes_per_s / 1e9, where.c_str(), floor_bandwidth(c) / 1e12, kHostFloorMargin);
  return buf;
}

Result<Ceilings> load_or_measure_ceilings(const SandboxOptions& base, Compiler& compiler,
                                          const std::string& cache_dir, CeilingsMode mode) {
  if (device_backend(base.backend) != base.backend) {
    // A triton evaluator's GPU is measured by the cuda backend's probes (CUDA C++ through
    // NVRTC): the same figures, and the same cache entry, as a cuda evaluator's on that GPU.
    SandboxOptions device = base;
    device.backend = std::string(device_backend(base.backend));
    KILN_ASSIGN_OR_RETURN(std::unique_ptr<Toolchain> probes,
                          Toolchain::create(device.backend, cache_dir));
    return load_or_measure_ceilings(device, probes->compiler(), cache_dir, mode);
  }
  const char* injected = std::getenv("CUDA_INJECTION64_PATH");
  const bool under_tool = injected && *injected;
  const bool cuda = base.backend == "cuda";
  // 512 MiB each way on a GPU (10x an H100's L2); an L1-sized buffer on a host.
  const size_t bytes = cuda ? (size_t{512} << 20) : kHostCopyBytes;
  SandboxOptions options = base;
  options.arena_bytes = 2 * bytes + (1 << 20);
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Sandbox> sandbox, Sandbox::spawn(options));

  // Per GPU model; per CPU model and host on a host (a VM's model name can be as vague as
  // "Intel(R) Xeon(R) Processor", and a cache folder can be shared between hosts).
  fs::path dir = fs::path(cache_dir) / "ceilings";
  const std::string key = cuda ? sandbox->arch() + "-" + sandbox->device_name()
                               : sandbox->arch() + "-" + sandbox->device_name() + "-" + host_name();
  fs::path file = dir / (file_key(key) + ".json");
  std::optional<Ceilings> cached;
  if (fs::exists(file)) {
    std::ifstream in(file);
    nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
    const bool needs_matrix = cuda && sandbox->arch() == "sm_90a";
    // An attainable figure of 0 under the GEMM's name (it failed here) is kept: --remeasure tries
    // again.
    const bool needs_gemm = cuda && attainable_gemm_applies(sandbox->arch());
    if (j.is_object() && j.value("bandwidth_bytes_per_s", 0.0) > 0 &&
        (!needs_matrix || j.value("matrix_flops_per_s", 0.0) > 0) &&
        (!needs_gemm || j.value("attainable_probe", "") == kGemmProbeName) &&
        (cuda || j.value("probe", "") == kHostProbeName)) {
      cached = Ceilings{j.value("device", ""),
                        j.value("arch", ""),
                        j.value("bandwidth_bytes_per_s", 0.0),
                        j.value("matrix_flops_per_s", 0.0),
                        j.value("attainable_flops_per_s", 0.0),
                        j.value("attainable_error", ""),
                        j.value("copy_bytes", 0.0),
                        file.string()};
    }
  }
  if (cached && (mode == CeilingsMode::kUseCache || under_tool)) return *cached;

  const auto start = std::chrono::steady_clock::now();
  Ceilings c{sandbox->device_name(), sandbox->arch(), 0, 0, 0, "", 0, file.string(), true};
  nlohmann::json record;
  if (cuda) {
    CompileRequest req;
    req.source = kCudaCopy;
    // Named kiln_* so profilers can leave kiln's own kernels out.
    req.kernel_name = "kiln_copy";
    req.arch = sandbox->arch();
    req.signature = {{ArgSpec::Kind::kTensorIn, DType::kF32, "src"},
                     {ArgSpec::Kind::kTensorOut, DType::kF32, "dst"},
                     {ArgSpec::Kind::kInt64, DType::kI64, "n"}};
    // Non-zero source data (zeros can run faster than real data).
    std::fill(sandbox->arena(), sandbox->arena() + bytes, static_cast<unsigned char>(0x3C));
    const auto n = static_cast<int64_t>(bytes / 16);
    // clang-format off
    nlohmann::json timing = {
        {"grid", {(n + 1023) / 1024, 1, 1}}, {"block", {256, 1, 1}},
        {"shared_bytes", 0},
        {"args", {{{"tensor", 0}}, {{"tensor", 1}}, {{"i64", n}}}},
        {"sets", {{{{"offset", 0}, {"bytes", bytes}, {"out", false}},
                   {{"offset", bytes}, {"bytes", bytes}, {"out", true}}}}},
        {"warmup", 3}, {"min_samples", 20}, {"max_samples", 200}, {"max_ms", 2000},
        {"target_noise_rel", 0.005}, {"flush_l2", true}, {"poison", 0}};
    // clang-format on
    KILN_ASSIGN_OR_RETURN(TimingStats t,
                          run_probe(*sandbox, compiler, req, dir, "bandwidth probe", timing));
    if (sandbox->arena()[bytes + 12345] != 0x3C) {
      return internal_error("the bandwidth probe did not copy its input; refusing its timing");
    }
    // The best sample, not the median: the floor must never be stricter than what the device did.
    c.bandwidth_bytes_per_s = 2.0 * bytes / (t.min_us * 1e-6);
    c.copy_bytes = 2.0 * bytes;
    record = {{"median_us", t.median_us}, {"samples", t.samples}};
    if (sandbox->arch() == "sm_90a") {
      Result<double> rate = measure_matrix_rate(*sandbox, compiler, dir);
      if (!rate.is_ok()) return rate.status().with_context("measuring the tensor-core rate");
      c.matrix_flops_per_s = *rate;
    }
    // Last: a GEMM that kills the sandbox leaves nothing else unmeasured. Its failure costs the
    // report its attainable figure, not the floor.
    if (attainable_gemm_applies(sandbox->arch())) {
      const auto gemm_start = std::chrono::steady_clock::now();
      Result<double> rate = measure_attainable_gemm(*sandbox, compiler, dir);
      record["attainable_measure_s"] =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - gemm_start).count();
      if (rate.is_ok()) {
        c.attainable_flops_per_s = *rate;
      } else {
        c.attainable_error = rate.status().message();
        spdlog::warn(
            "measuring the attainable GEMM rate: {} (fraction_of_attainable is not "
            "reported)",
            c.attainable_error);
      }
      record["attainable_probe"] = kGemmProbeName;
      record["attainable_error"] = c.attainable_error;
    }
    // A real GEMM's median faster than the issue-rate probe's best sample means the probe
    // underestimates the device, and a floor from it would reject honest kernels (docs/threats.md
    // row 9): the floor takes the GEMM's rate instead.
    if (c.matrix_flops_per_s > 0 && c.attainable_flops_per_s > c.matrix_flops_per_s) {
      spdlog::warn(
          "the attainable GEMM ({:.0f} TFLOP/s) beat the tensor-core probe ({:.0f} "
          "TFLOP/s); the floor uses the GEMM's rate",
          c.attainable_flops_per_s / 1e12, c.matrix_flops_per_s / 1e12);
      c.matrix_flops_per_s = c.attainable_flops_per_s;
    }
  } else {
    std::fill(sandbox->arena(), sandbox->arena() + bytes, static_cast<unsigned char>(0x3C));
    Result<double> rate = measure_host_copy(*sandbox, compiler, dir);
    if (!rate.is_ok()) return rate.status().with_context("measuring the host's copy rate");
    c.bandwidth_bytes_per_s = *rate;
    c.copy_bytes = 2.0 * static_cast<double>(bytes) * kHostCopyPasses;
    record = {{"probe", kHostProbeName}, {"host", host_name()}, {"floor_margin", kHostFloorMargin}};
  }
  c.measure_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (under_tool) {
    spdlog::warn("device ceilings measured under an injected CUDA tool ({}): used by this process "
                 "only, not cached", injected);
    c.cache_file.clear();
    return c;
  }
  if (cached && mode == CeilingsMode::kKeepHigher) {
    c.bandwidth_bytes_per_s = std::max(c.bandwidth_bytes_per_s, cached->bandwidth_bytes_per_s);
    c.matrix_flops_per_s = std::max(c.matrix_flops_per_s, cached->matrix_flops_per_s);
    if (cached->attainable_flops_per_s > c.attainable_flops_per_s) {
      c.attainable_flops_per_s = cached->attainable_flops_per_s;
      c.attainable_error.clear();
      if (record.contains("attainable_error")) record["attainable_error"] = "";
    }
  }
  nlohmann::json j = {{"device", c.device},
                      {"arch", c.arch},
                      {"bandwidth_bytes_per_s", c.bandwidth_bytes_per_s},
                      {"matrix_flops_per_s", c.matrix_flops_per_s},
                      {"attainable_flops_per_s", c.attainable_flops_per_s},
                      {"copy_bytes", c.copy_bytes},
                      {"measure_s", c.measure_s}};
  j.update(record);
  // Evaluators that start together may all measure: each writes a file of its own, then renames
  // it over the cache (the last one wins; every one is a whole file).
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (Status s = write_file_atomically(file.string(), j.dump(2) + "\n"); !s.is_ok()) {
    spdlog::warn("could not cache the device ceilings: {}", s.message());
    c.cache_file.clear();
  }
  return c;
}

}  // namespace kiln::eval
