// The verification stages' cases (verification_cases.h).
#include "evaluator/verification_cases.h"

#include <algorithm>
#include <cstdint>

namespace kiln::eval {
namespace {

int64_t shape_size(const Shape& s) {
  int64_t n = 1;
  for (const auto& [k, v] : s) n *= v;
  return n;
}

// Whether the target leaves distribution `d` out of the adversarial stage for `dtype`.
bool adversarial_skipped(const TargetSpec& target, DType dtype, Distribution d) {
  auto it = target.adversarial_skip.find(dtype);
  if (it == target.adversarial_skip.end()) return false;
  const auto& names = it->second.first;
  return std::find(names.begin(), names.end(), std::string(distribution_name(d))) != names.end();
}

// The largest sweep shape and every edge shape, other than `except`, each once: where the
// adversarial and determinism stages repeat (docs/threats.md row 17) -- the edges because they
// are cheap and odd, the largest because kernels change strategy with size.
std::vector<Shape> other_shapes(const TargetSpec& target, const Shape& except) {
  std::vector<Shape> out;
  std::vector<const Shape*> candidates = {&largest_sweep_shape(target)};
  for (const Shape& s : target.edge) candidates.push_back(&s);
  for (const Shape* s : candidates) {
    if (*s != except && std::find(out.begin(), out.end(), *s) == out.end()) out.push_back(*s);
  }
  return out;
}

}  // namespace

const Shape& largest_sweep_shape(const TargetSpec& target) {
  const Shape* biggest = &target.smoke.front();
  for (const auto& s : target.sweep) {
    if (shape_size(s) > shape_size(*biggest)) biggest = &s;
  }
  return *biggest;
}

std::vector<CaseSpec> verification_cases(const TargetSpec& target, const std::vector<DType>& dtypes,
                                         std::string_view stage_name, DType timing_dtype) {
  const std::string stage(stage_name);
  std::vector<CaseSpec> cases;
  if (stage == "smoke") {
    for (const auto& s : target.smoke)
      cases.push_back({stage, s, timing_dtype, Distribution::kNormal});
  } else if (stage == "sweep") {
    int i = 0;
    for (const auto& s : target.sweep) {
      for (DType d : dtypes) {
        cases.push_back({stage, s, d, (i++ % 2) ? Distribution::kUniform : Distribution::kNormal});
      }
    }
  } else if (stage == "adversarial") {
    // Every distribution in the timed dtype at the first sweep shape; in each other dtype the
    // ones that break kernels which are only right at small, well-scaled values (overflow, lost
    // precision, inf/NaN): a candidate that cuts corners in a dtype nobody times is still
    // caught. Those three also run in the timed dtype at the largest sweep shape and at every
    // edge shape, so unsafe numerics at any shape but one show (docs/threats.md row 17).
    const Shape& s = target.sweep.empty() ? target.smoke.front() : target.sweep.front();
    const Distribution breaking[] = {Distribution::kLargeMagnitude, Distribution::kMixedScale,
                                     Distribution::kSpecial};
    for (Distribution d :
         {Distribution::kLargeMagnitude, Distribution::kSmallMagnitude, Distribution::kMixedScale,
          Distribution::kAllEqual, Distribution::kZeros, Distribution::kSpecial}) {
      if (adversarial_skipped(target, timing_dtype, d)) continue;
      cases.push_back({stage, s, timing_dtype, d});
    }
    for (DType other : dtypes) {
      if (other == timing_dtype) continue;
      for (Distribution d : breaking) {
        if (adversarial_skipped(target, other, d)) continue;
        cases.push_back({stage, s, other, d});
      }
    }
    for (const Shape& more : other_shapes(target, s)) {
      for (Distribution d : breaking) {
        if (adversarial_skipped(target, timing_dtype, d)) continue;
        cases.push_back({stage, more, timing_dtype, d});
      }
    }
  } else if (stage == "determinism") {
    // Bitwise repeats at the largest sweep shape and at every edge shape (docs/threats.md row 17:
    // nondeterminism everywhere but at one shape).
    const Shape& biggest = largest_sweep_shape(target);
    cases.push_back({stage, biggest, timing_dtype, Distribution::kNormal});
    for (const Shape& more : other_shapes(target, biggest)) {
      cases.push_back({stage, more, timing_dtype, Distribution::kNormal});
    }
  } else if (stage == "edge") {
    for (const auto& s : target.edge)
      cases.push_back({stage, s, timing_dtype, Distribution::kNormal});
  }
  return cases;
}

}  // namespace kiln::eval
