// Device ceilings: the measured copy bandwidth (bytes read + written per second) of a GPU model
// (or of the host, for the cpu backend), measured once and cached per device. The evaluator uses
// it for each candidate's fraction of the floor and to reject times that are physically
// impossible (THREATS.md row 9).
#pragma once

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
  double copy_bytes = 0;          // size of the measurement (read + written)
};

// How the cache of ceilings is used.
enum class CeilingsMode {
  kUseCache,    // the cached ceilings when there are any, else measure and cache (`kiln eval`)
  kReplace,     // measure and replace the cache (`kiln eval --remeasure`)
  // Measure, and keep the higher of the new and the cached figure of each ceiling (evaluator
  // daemons, at start): a measurement taken while the GPU was slowed (shared, throttled, under
  // a profiler) must not make the floor stricter than the device really is, where an honest fast
  // kernel would be rejected as impossible; a later good measurement repairs the cache.
  kKeepHigher,
};

// Returns the ceilings of the device behind `options` (cache: <cache_dir>/ceilings/), measured in
// a sandbox of their own: a grid-stride 16-byte copy over a buffer far larger than the L2, timed
// like a candidate (L2 flushed), best sample; and on sm_90a a wgmma f16 probe, best sample.
// Under an injected CUDA tool (CUDA_INJECTION64_PATH set: Nsight Compute, Nsight Systems,
// `kiln profile`) kernels run slower than they can: the cache is used when it exists, and what
// is measured is used for this process only, never cached.
Result<Ceilings> load_or_measure_ceilings(const SandboxOptions& options, Compiler& compiler,
                                          const std::string& cache_dir,
                                          CeilingsMode mode = CeilingsMode::kUseCache);

}  // namespace kiln::eval
