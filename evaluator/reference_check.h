// `kiln targets --check`'s run of a target's reference: at each given shape, once on inputs drawn
// as the evaluator draws them (Reference::compute, and compute_rows / compute_terms on one row
// where the reference exports them), each call in a child forked for it (forked_call.h). A
// reference that crashes, calls exit(), throws or does not return is found here, before any
// evaluation runs it in the evaluator's own process.
#pragma once

#include <chrono>
#include <vector>

#include "evaluator/reference.h"
#include "shared/status.h"
#include "shared/target_spec.h"

namespace kiln::eval {

// OK when every call returned within `deadline` each (shorter than the reference's own
// deadline); else the first failure, naming the shape and the entry point.
Status check_reference(const Reference& ref, const TargetSpec& target,
                       const std::vector<Shape>& shapes, std::chrono::milliseconds deadline);

}  // namespace kiln::eval
