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

// Returns the cached ceilings of the device behind `options` (cache: <cache_dir>/ceilings/), or
// measures them in a sandbox of their own: a grid-stride 16-byte copy over a buffer far larger
// than the L2, timed like a candidate (L2 flushed), best sample; and on sm_90a a wgmma f16 probe, best sample.
Result<Ceilings> load_or_measure_ceilings(const SandboxOptions& options, Compiler& compiler,
                                          const std::string& cache_dir, bool remeasure = false);

}  // namespace kiln::eval
