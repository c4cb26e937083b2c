// One candidate evaluated on this machine through the same sandboxed pipeline as `kiln eval` and
// the evaluator daemon (five verification stages, then the timing unless told not to): what
// `kiln export` runs before it writes an export, and `kiln verify` to re-check one.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "evaluator/evaluation.h"
#include "shared/protocol.h"
#include "shared/status.h"
#include "shared/target_spec.h"

namespace kiln::cli {

struct LocalEvalOptions {
  bool time = true;
  int gpu = 0;
  std::string cache_dir;                    // "" = the default cache
  std::optional<Shape> benchmark_override;  // time at this shape instead of the backend's
  eval::ProgressFn progress;                // stage lines, may be empty
};

struct LocalEval {
  proto::EvaluationResult result;
  std::string device;    // "NVIDIA H100 80GB HBM3", "cpu (...)"
  std::string arch;      // "sm_90a", "cpu"
  nlohmann::json tools;  // kiln version and commit, NVRTC, driver, compiler
};

// Whether this machine can evaluate on `backend` (cpu: always; cuda: a driver, NVRTC and a GPU),
// and if not, why.
std::string backend_unavailable_here(const std::string& backend);

// Evaluates `candidate` of `target` on `backend` here. Fails only when the pipeline cannot start
// (no toolchain, no device); every verdict is in the result.
Result<LocalEval> evaluate_here(const TargetSpec& target, const std::string& backend,
                                const eval::CandidateSpec& candidate, DType dtype,
                                const LocalEvalOptions& options);

}  // namespace kiln::cli
