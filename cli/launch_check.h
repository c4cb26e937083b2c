// The launch checks `kiln targets --check` makes of one kernel without a GPU: its launch geometry
// (threads per block, dynamic shared memory, grid) and its tensor maps, at the benchmark shape and
// every verification shape (smoke, sweep, edge), in every dtype of the backend. A template
// configuration that passes its constraints but fails here would be proposed by the search and
// fail every evaluation.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "shared/dtype.h"
#include "shared/target_spec.h"

namespace kiln::cli {

// The launch limits of every CUDA device kiln targets: a block of at most 1,024 threads and at
// most 227 KB of dynamic shared memory (sm_90).
constexpr uint64_t kMaxThreadsPerBlock = 1024;
constexpr uint64_t kMaxSharedBytes = 227 * 1024;

struct LaunchProblem {
  Shape shape;
  DType dtype = DType::kF32;
  std::string why;  // "232448 bytes of shared memory", a map's box error, ...
};

// The problems of `spec` (the seed or the template of `backend`) with `params`: at most one per
// shape, its first failing dtype. Empty when the kernel launches everywhere.
std::vector<LaunchProblem> launch_problems(const TargetSpec& t, const std::string& backend,
                                           const BackendSpec& b, const KernelSpec& spec,
                                           const std::map<std::string, std::string>& params);

}  // namespace kiln::cli
