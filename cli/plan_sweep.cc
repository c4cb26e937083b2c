// Shape sweeps from profile plans: see plan_sweep.h.
#include "cli/plan_sweep.h"

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "evaluator/profile/plan.h"

namespace kiln::cli {

Result<coordinator::ShapeSweep> load_sweep_or_plan(const std::string& path,
                                                   const std::vector<TargetSpec>& targets,
                                                   std::string* note) {
  std::ifstream in(path);
  if (!in) return not_found("cannot read the shape sweep " + path);
  std::stringstream text;
  text << in.rdbuf();
  nlohmann::json j = nlohmann::json::parse(text.str(), nullptr, false);
  if (!j.is_object() || !j.contains("kiln_plan")) {  // a sweep file, as load_shape_sweep reads it
    Result<coordinator::ShapeSweep> sweep = coordinator::parse_shape_sweep(text.str(), targets);
    if (!sweep.is_ok()) return sweep.status().with_context(path);
    return sweep;
  }

  KILN_ASSIGN_OR_RETURN(profile::Plan plan, profile::parse_plan(text.str(), path));
  nlohmann::json sweep = nlohmann::json::object();
  std::string taken, without;
  for (const profile::PlanTarget& t : plan.targets) {
    const bool in_run = std::any_of(targets.begin(), targets.end(),
                                    [&](const TargetSpec& s) { return s.name == t.target; });
    if (!in_run) continue;
    if (t.shapes.empty()) {
      without += (without.empty() ? "" : ", ") + t.target;
      continue;
    }
    nlohmann::json shapes = nlohmann::json::array();
    for (size_t i = 0; i < t.shapes.size() && i < coordinator::kMaxSweepShapes; ++i) {
      shapes.push_back(t.shapes[i].shape);
    }
    taken += (taken.empty() ? "" : ", ") + t.target + " at " + std::to_string(shapes.size()) +
             " shape(s)";
    sweep[t.target] = shapes;
  }
  if (sweep.empty()) {
    return invalid_argument(
        path + ": the plan holds no shapes for this run's targets" +
        (without.empty() ? std::string() : " (" + without + " ran, at unrecorded shapes)") +
        "; profile the program with its step inside torch.autograd.profiler.emit_nvtx("
        "record_shapes=True) so that kiln profile can recover them");
  }
  Result<coordinator::ShapeSweep> parsed = coordinator::parse_shape_sweep(sweep.dump(), targets);
  if (!parsed.is_ok()) return parsed.status().with_context(path);
  if (note != nullptr) {
    *note = "shapes from the plan " + path + ": " + taken +
            (without.empty() ? "" : "; no shapes recorded for " + without);
  }
  return parsed;
}

}  // namespace kiln::cli
