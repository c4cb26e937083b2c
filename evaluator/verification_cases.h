// Which cases each verification stage runs: shapes, dtypes and input distributions, from the
// target's spec alone. The evaluation runs them (evaluation.cc); tests that check a target's
// tolerances against honest kernels take the same shapes from here, so that they follow the
// stages when those change.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "evaluator/tensor_data.h"
#include "shared/target_spec.h"

namespace kiln::eval {

// One verification case: a shape, a dtype and an input distribution.
struct CaseSpec {
  std::string stage;
  Shape shape;
  DType dtype = DType::kF32;
  Distribution dist = Distribution::kNormal;
};

// The cases of `stage` ("smoke", "sweep", "adversarial", "determinism", "edge"; none for any
// other name) for a candidate verified in `dtypes` and timed in `timing_dtype`. The target has
// at least one smoke shape (the spec loader requires it).
std::vector<CaseSpec> verification_cases(const TargetSpec& target, const std::vector<DType>& dtypes,
                                         std::string_view stage, DType timing_dtype);

// The largest sweep shape (the smoke shape where there is no sweep).
const Shape& largest_sweep_shape(const TargetSpec& target);

}  // namespace kiln::eval
