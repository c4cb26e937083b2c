// EvaluationResult -> JSON.
#include "evaluator/result_json.h"

namespace kiln::eval {

nlohmann::json result_to_json(const proto::EvaluationResult& r) {
  nlohmann::json stages = nlohmann::json::array();
  for (const auto& s : r.stages) {
    stages.push_back({{"name", s.name}, {"passed", s.passed}, {"detail", s.detail},
                      {"worst_rel_error", s.worst_rel_error}, {"cases", s.cases}});
  }
  return {{"task_id", r.task_id},
          {"candidate_id", r.candidate_id},
          {"arch", r.arch},
          {"outcome", proto::outcome_name(r.outcome)},
          {"stages", stages},
          {"timing",
           {{"median_us", r.timing.median_us},
            {"iqr_us", r.timing.iqr_us},
            {"min_us", r.timing.min_us},
            {"samples", r.timing.samples},
            {"noise_rel", r.timing.noise_rel},
            {"sm_clock_mhz", r.timing.sm_clock_mhz},
            {"throttled_samples", r.timing.throttled_samples},
            {"stopped_early", r.timing.stopped_early}}},
          {"metrics", r.metrics},
          {"log", r.log},
          {"wall_ms", r.wall_ms},
          {"bottleneck", r.bottleneck},
          {"profile_note", r.profile_note},
          {"unit", r.unit},
          {"evaluator", r.evaluator},
          {"evaluator_gpu_model", r.evaluator_gpu_model},
          {"shape", r.shape}};  // the sweep's shape it was timed at; {} for the benchmark's
}

}  // namespace kiln::eval
