// The text `kiln profile` prints for a plan: the top kernels, the target types, the totals.
#pragma once

#include <cstddef>
#include <string>

#include "evaluator/profile/plan.h"

namespace kiln::profile {

// A kernel name cut to `width` columns for a table: "void " and the parameter list dropped, the
// rest cut with "..." (the plan keeps the full name).
std::string short_kernel_name(const std::string& name, size_t width);

// The ranking: the `top` kernels by GPU time (kernel, calls, total ms, share %, target, gain at
// plan.speedup), then one line per target type and one for the unmapped kernels, then the totals.
std::string format_ranking(const Plan& plan, size_t top);

// The shapes recovered from NVTX ranges, per target (up to 8 each, most time first), or the one
// line that says why there are none: `with_range` of `kernels` records had a range.
std::string format_shapes(const Plan& plan, uint64_t with_range, uint64_t kernels);

}  // namespace kiln::profile
