// A target's standing as shown: see target_report.h.
#include "coordinator/target_report.h"

#include "shared/redis_keys.h"

namespace kiln::coordinator {

std::string unit_key(const std::string& target, const std::string& gpu_model,
                     const std::string& shape) {
  std::string key = shape.empty() ? target : target + "-" + shape;
  if (gpu_model.empty()) return key;
  return key + "@" + redis::keys::safe_key_component(gpu_model);
}

std::string_view phase_name(Phase phase) {
  switch (phase) {
    case Phase::kStarting:
      return "starting";
    case Phase::kEvaluatingSeed:
      return "evaluating the seed";
    case Phase::kSearching:
      return "searching";
    case Phase::kConverged:
      return "converged";
    case Phase::kStopped:
      return "stopped";
    case Phase::kFailed:
      return "failed";
  }
  return "?";
}

bool is_final(Phase phase) {
  return phase == Phase::kConverged || phase == Phase::kStopped || phase == Phase::kFailed;
}

std::optional<Phase> final_phase_of(std::string_view state) {
  const std::string_view word = state.substr(0, state.find(':'));
  for (Phase p : {Phase::kConverged, Phase::kStopped, Phase::kFailed}) {
    if (word == phase_name(p)) return p;
  }
  return std::nullopt;
}

nlohmann::json report_json(const TargetReport& r) {
  nlohmann::json j = {{"target", r.target},
                      {"gpu_model", r.gpu_model},
                      {"state", r.state},
                      {"evaluations", r.evaluations},
                      {"failures", r.failures},
                      {"accepted", r.accepted},
                      {"seed_us", r.seed_us},
                      {"best_us", r.best_us},
                      {"fraction_of_floor", r.fraction_of_floor},
                      {"best_id", r.best_id},
                      {"best", r.best_label}};
  if (!r.shape.empty()) j["shape"] = r.shape;  // only in a shape sweep: older readers see no change
  return j;
}

}  // namespace kiln::coordinator
