// The search loop of one run: per target, the seed is evaluated first (its time is the baseline),
// then the template's first valid configuration, then children the built-in proposer makes from
// parents the population selects; every verified child is judged against its parent (keep or
// revert), a new best is re-timed before it is crowned, and a target stops at its convergence
// limits. Evaluations go through the Dispatcher (so through Redis leases and the workers); the
// engine holds the search state, which the results in Redis can rebuild.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "agent/builtin_proposer.h"
#include "coordinator/dispatcher.h"
#include "coordinator/search.h"
#include "shared/target_spec.h"

namespace kiln::coordinator {

struct EngineOptions {
  std::string backend = "cpu";
  SearchParams search;
  ConvergenceLimits limits;
  std::chrono::seconds budget{0};   // whole run; 0: until every target converges
  uint32_t in_flight_per_target = 2;  // on average: allocate() moves slots between targets
  std::map<std::string, double> weights;  // share of end-to-end time per target (default equal)
  uint64_t seed = 1;
  std::string toolchain = "kiln";   // part of candidate ids
};

// One target's standing, for progress lines, `kiln status` and the summary.
struct TargetReport {
  std::string target;
  std::string state = "starting";   // starting, searching, converged (with why), failed
  uint64_t evaluations = 0;         // results received
  uint64_t failures = 0;            // results that did not verify
  uint64_t accepted = 0;            // children kept
  double seed_us = 0;
  double best_us = 0;
  double fraction_of_floor = 0;     // of the best, as its evaluator measured it
  std::string best_id;
  std::map<std::string, std::string> best_params;
  std::string best_source;
  std::string best_label;           // "seed" or "template BLOCK=256,VEC=8"
};

class Engine {
 public:
  // `targets` must each have a kernel for options.backend.
  Engine(std::vector<TargetSpec> targets, Dispatcher& dispatcher, EngineOptions options);
  ~Engine();

  // Runs until every target has converged or failed, the budget is spent or `stop` is set;
  // `progress` is called about once a second and at the end.
  Status run(const std::atomic<bool>& stop,
             const std::function<void(const std::vector<TargetReport>&)>& progress);

  std::vector<TargetReport> reports() const;

  // Every result received, in arrival order (for the output folder).
  const std::vector<proto::EvaluationResult>& results() const { return results_; }

 private:
  struct TargetState;
  struct Pending {
    size_t target = 0;
    enum class Kind { kSeed, kChild, kRetime } kind = Kind::kChild;
    Individual parent;   // kChild: the parent as it was; kRetime: the candidate re-timed
    Individual child;    // kChild: id, params, island, op; kRetime: unused
    std::string source;
  };

  void allocate();
  void top_up(size_t t);
  void on_result(const proto::EvaluationResult& r);
  std::string submit(size_t t, Pending::Kind kind, const std::string& source,
                     const std::map<std::string, std::string>& params, const std::string& id);

  Dispatcher* dispatcher_;
  EngineOptions options_;
  std::vector<std::unique_ptr<TargetState>> targets_;
  std::map<std::string, Pending> pending_;  // by task id
  std::vector<proto::EvaluationResult> results_;
  std::mt19937_64 rng_;
  std::chrono::steady_clock::time_point start_;
  uint64_t task_seq_ = 0;
};

}  // namespace kiln::coordinator
