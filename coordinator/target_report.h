// One target's standing on one GPU model as the run shows it: its phase, and the report that
// progress lines, `kiln status`, Redis (kiln:target:{key}) and summary.json carry.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace kiln::coordinator {

// The name of a target's population on one GPU model, as Redis (kiln:target:{key}), `kiln status`
// and the output folder know it: the target's name, plus "@" and the model with spaces made "_"
// when the population belongs to one model (e.g. "matmul@NVIDIA_H100_80GB_HBM3"); a population
// of a shape sweep names its shape (shape_string) after the target and a '-' (target names are
// identifiers): "matmul-K=4096,M=16,N=4096@NVIDIA_H100_80GB_HBM3".
std::string unit_key(const std::string& target, const std::string& gpu_model,
                     const std::string& shape = "");

// Where a target's search is. The last three are final: nothing more is proposed or judged.
enum class Phase {
  kStarting,        // nothing sent yet
  kEvaluatingSeed,  // the seed's task is out: its time will be the baseline
  kSearching,       // children are proposed and judged
  kConverged,       // a convergence limit was reached, or there is nothing (more) to search
  kStopped,         // the time budget was spent first
  kFailed,          // the target cannot be searched (no kernel for the backend, a seed that fails)
};

// "starting", "evaluating the seed", "searching", "converged", "stopped", "failed".
std::string_view phase_name(Phase phase);
bool is_final(Phase phase);
// The final phase a target's shown state begins with ("converged: no improvement in 64
// proposals" is kConverged); nullopt when it begins with none.
std::optional<Phase> final_phase_of(std::string_view state);

struct TargetReport {
  std::string target;
  std::string gpu_model;  // the population's GPU model; "" for any
  std::string shape;      // the sweep's shape it is timed at (shape_string); "" for the benchmark's
  // As shown: phase_name() of a phase that is not final; of a final one, its name and why
  // ("converged: no improvement in 64 proposals", "failed: the seed did not verify ...").
  std::string state = "starting";
  uint64_t evaluations = 0;  // results received
  uint64_t failures = 0;     // results that did not verify
  uint64_t accepted = 0;     // children kept
  double seed_us = 0;
  double best_us = 0;
  double fraction_of_floor = 0;  // of the best, as its evaluator measured it
  std::string best_id;
  std::map<std::string, std::string> best_params;
  std::string best_source;
  std::string best_label;  // "seed" or "template BLOCK=256,VEC=8"
};

// A target's standing as JSON: summary.json's entries, kiln:target:* (as text), `kiln status
// --json` and the targets of the coordinator's /status.
nlohmann::json report_json(const TargetReport& r);

}  // namespace kiln::coordinator
