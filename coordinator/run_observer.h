// What the coordinator shows of a run while it goes (docs/observe.md): the /status JSON document
// and the /metrics Prometheus text, built on the search loop's thread from the engine and the
// dispatcher once a turn (about once a second), then handed to the HTTP thread as finished text
// (status_server.h), so a scrape never touches the search state and never waits for the loop.
//
// Counters that grow with the run (evaluations by outcome, the duration histogram) are updated
// incrementally from the results that arrived since the last call; everything else is read as it
// is now. Labels are bounded: target, GPU model, outcome, role, state, model, kind -- never a
// candidate, task or worker id, whose number grows without bound.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <tuple>

#include "coordinator/dispatcher.h"
#include "coordinator/engine.h"

namespace kiln::coordinator {

struct RunDescription {
  std::string mode;  // "run" or "coordinator"
  std::string backend;
  double budget_s = 0;  // 0: none
};

class RunObserver {
 public:
  explicit RunObserver(RunDescription description) : description_(std::move(description)) {}

  // Reads the engine and dispatcher as they are now (on the loop's thread) and rebuilds both
  // documents. `store` may be null (its error count is then 0).
  void observe(const Engine& engine, const Dispatcher& dispatcher, const redis::Store* store);

  const std::string& status_json() const { return status_json_; }
  const std::string& metrics_text() const { return metrics_text_; }

  // Upper bounds of the evaluation duration histogram, in seconds (+Inf is implied).
  static constexpr std::array<double, 12> kDurationBuckets = {0.05, 0.1, 0.25, 0.5, 1,   2.5,
                                                              5,    10,  30,   60,  120, 300};

 private:
  struct Histogram {
    std::array<uint64_t, kDurationBuckets.size()> buckets{};  // cumulative counts per bound
    uint64_t count = 0;
    double sum = 0;
  };
  using Unit = std::pair<std::string, std::string>;  // target, GPU model

  void count_new_results(const Engine& engine);
  std::string build_metrics(const Engine& engine, const Dispatcher& dispatcher,
                            const redis::Store* store) const;
  std::string build_status(const Engine& engine, const Dispatcher& dispatcher,
                           const redis::Store* store) const;

  RunDescription description_;
  size_t results_seen_ = 0;
  std::map<std::tuple<std::string, std::string, std::string>, uint64_t>
      evaluations_;  // unit + outcome
  std::map<Unit, Histogram> durations_;
  std::string status_json_;
  std::string metrics_text_;
};

// What each LLM model cost and gained (Engine::llm_use), as /status and <out>/llm-usage.json give
// it: [{model, calls, input_tokens, output_tokens, cost_usd, accepted}, ...].
nlohmann::json llm_use_json(const Engine& engine);

// A Prometheus label value escaped for the text format (backslash, double quote, newline).
std::string prometheus_label(std::string_view value);

}  // namespace kiln::coordinator
