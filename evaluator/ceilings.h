// Device ceilings: the measured copy bandwidth (bytes read + written per second) of a GPU model
// (or of one host core, for the cpu backend), measured once and cached per device. The evaluator
// uses it for each candidate's fraction of the floor and to reject times that are physically
// impossible (docs/threats.md row 9). On a GPU also the tensor-core issue rate (part of that floor)
// and the rate a real f16 GEMM attains (reporting only: fraction_of_attainable).
#pragma once

#include <cstdint>
#include <string>

#include "evaluator/backend.h"
#include "evaluator/sandbox.h"
#include "shared/status.h"

namespace kiln::eval {

struct Ceilings {
  std::string device;
  std::string arch;
  double bandwidth_bytes_per_s = 0;
  double matrix_flops_per_s = 0;  // 0: not measured (no flops floor is applied)
  // The rate of kiln's own f16 GEMM (4096^3, random data) timed like a candidate: what a good
  // kernel attains, where matrix_flops_per_s is what no kernel can beat. For reporting
  // (fraction_of_attainable); it touches the floor only where it beats the probe, which then
  // understated the device: matrix_flops_per_s is raised to it. 0: unknown (a GPU before sm_80,
  // the cpu backend, or the GEMM failed: attainable_error says why).
  double attainable_flops_per_s = 0;
  std::string attainable_error;
  double copy_bytes = 0;          // size of the measurement (read + written)
  // Not cached: where the figures are cached, and whether this call measured them (else they were
  // read from that file) and how long that took.
  std::string cache_file;
  bool measured = false;
  double measure_s = 0;
};

// On the cpu backend the floor is a sanity bound, not a roofline. The host probe is the fastest
// copy one core does: a buffer that stays in L1, copied by a vectorised loop and by memcpy, best
// of the two. Candidates are single-threaded, but their shapes can sit in a cache (the timer's
// flush evicts 64 MiB, less than some last-level caches; a --shape can be tiny), and a kernel can
// beat a copy there: wider vectors than the probe's, two loads per store (a kernel with two
// inputs and one output moves 1.5x a copy's bytes per cycle where stores limit the copy), clock
// differences between the probe and the candidate. So the floor divides bytes by this many times
// the measured rate: no honest kernel gets near it (bench/results/2026-11-24-cpu-floor.md), and a
// rate like 5 TB/s on one core is still rejected.
inline constexpr double kHostFloorMargin = 4;

// The bandwidth the floor check divides bytes by (EvaluatorOptions::bandwidth_bytes_per_s): the
// measured copy rate on a GPU, kHostFloorMargin times it on a host (arch "cpu").
double floor_bandwidth(const Ceilings& c);

// One line for progress output and logs. On a GPU "device ceilings: copy 3.35 TB/s, f16 tensor
// cores 989 TFLOP/s, f16 GEMM attains 520 TFLOP/s" (bench/search_replay.cc reads the first two
// figures back; each of the last two only where measured); on a host "host ceilings:
// copy 490.3 GB/s on one core, L1-resident (...); the floor allows up to 1.96 TB/s (4x that)",
// with where the figure is cached and whether it was just measured.
std::string ceilings_line(const Ceilings& c);

// How the cache of ceilings is used.
enum class CeilingsMode {
  // The cached ceilings when there are any, else measure and cache (`kiln eval`; evaluator
  // daemons on the cpu backend, whose floor has kHostFloorMargin of room for a slow measurement).
  kUseCache,
  kReplace,  // measure and replace the cache (`kiln eval --remeasure`)
  // Measure, and keep the higher of the new and the cached figure of each ceiling (evaluator
  // daemons on a GPU, at start): a measurement taken while the GPU was slowed (shared, throttled,
  // under a profiler) must not make the floor stricter than the device really is, where an honest
  // fast kernel would be rejected as impossible; a later good measurement repairs the cache.
  kKeepHigher,
};

// Returns the ceilings of the device behind `options` (cache: <cache_dir>/ceilings/, one file per
// GPU model, or per CPU model and host name on the cpu backend), measured in a sandbox of their
// own. On a GPU: a grid-stride 16-byte copy over a buffer far larger than the L2, timed like a
// candidate (L2 flushed), best sample; on sm_90a a wgmma f16 probe, best sample; and from sm_80
// the attainable GEMM (attainable_gemm_request), timed like a candidate (L2 flushed before each
// sample, median), its output checked against host dot products before its rate is believed. On
// a host:
// an 8 KiB buffer copied again and again (L1-resident, no flush) by a loop and by memcpy, best
// sample of the faster; well under a second.
// Under an injected CUDA tool (CUDA_INJECTION64_PATH set: Nsight Compute, Nsight Systems,
// `kiln profile`) kernels run slower than they can: the cache is used when it exists, and what
// is measured is used for this process only, never cached.
Result<Ceilings> load_or_measure_ceilings(const SandboxOptions& options, Compiler& compiler,
                                          const std::string& cache_dir,
                                          CeilingsMode mode = CeilingsMode::kUseCache);

// The attainable GEMM, exposed for tests: C[M][N] = A[M][K] * B[N][K]^T, f16 inputs and output,
// f32 accumulation (mma.sync m16n8k16), kernel "kiln_gemm"
// (const __half* A, const __half* B, __half* C, long long M, long long N, long long K) launched
// on a grid of (N / kAttainableGemmTileN, M / kAttainableGemmTileM) blocks of
// kAttainableGemmThreads threads with attainable_gemm_shared_bytes(arch) of dynamic shared memory;
// M, N and K must be multiples of the tile sizes (128, 256, 64).
inline constexpr int kAttainableGemmTileM = 128;
inline constexpr int kAttainableGemmTileN = 256;
inline constexpr int kAttainableGemmTileK = 64;
inline constexpr int kAttainableGemmThreads = 256;
inline constexpr int kAttainableGemmSize = 4096;  // M = N = K of the measurement
// Whether the GEMM runs on `arch` (sm_80 and later: mma.sync f16, cp.async, ldmatrix).
bool attainable_gemm_applies(const std::string& arch);
// Dynamic shared memory it needs on `arch`: 3 stages of 48 KiB where a block may have that much
// (sm_80, sm_87, sm_90, sm_100...), 2 where it may have ~99 KiB (sm_86, sm_89, sm_120...).
uint32_t attainable_gemm_shared_bytes(const std::string& arch);
CompileRequest attainable_gemm_request(const std::string& arch);

}  // namespace kiln::eval
