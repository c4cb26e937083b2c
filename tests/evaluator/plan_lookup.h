// A plan's entry for one target, for the profile tests (profile_trace_test, profile_shapes_test).
#pragma once

#include <string>

#include "evaluator/profile/plan.h"

namespace kiln::profile {

// nullptr when the plan has no entry for `name`.
inline const PlanTarget* find_target(const Plan& plan, const std::string& name) {
  for (const PlanTarget& t : plan.targets) {
    if (t.target == name) return &t;
  }
  return nullptr;
}

}  // namespace kiln::profile
