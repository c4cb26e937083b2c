// `kiln run --shapes FILE` where FILE is a sweep file or a `kiln profile` plan: a plan sweeps
// every target of the run at the shapes its kernels ran at in the profiled program (the shapes
// the plan recovered from NVTX ranges, docs/profile.md), most GPU time first.
#pragma once

#include <string>
#include <vector>

#include "coordinator/shape_sweep.h"
#include "shared/status.h"
#include "shared/target_spec.h"

namespace kiln::cli {

// Reads `path` as a plan when it says `"kiln_plan"`, else as a sweep file (load_shape_sweep).
// From a plan: the run's targets that the plan has shapes for, each at up to
// coordinator::kMaxSweepShapes of them, checked against the target's dims like a sweep file's;
// INVALID_ARGUMENT when the plan has shapes for none of the run's targets (and says how to record
// them). `note` gets one line for the user on what was taken from the plan.
Result<coordinator::ShapeSweep> load_sweep_or_plan(const std::string& path,
                                                   const std::vector<TargetSpec>& targets,
                                                   std::string* note);

}  // namespace kiln::cli
