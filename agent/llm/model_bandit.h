// Which model to ask next when several are configured: Thompson sampling on accepted improvements
// per dollar. Each model's chance that a proposal is accepted is Beta(1 + accepted, 1 + proposals
// - accepted); one draw from it divided by the model's mean cost per proposal (never below a floor,
// so free local models are not infinitely attractive) scores the model, and the highest score is
// asked. Models with no proposals yet are tried first, in configuration order. Thread-safe.
#pragma once

#include <cstdint>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace kiln::agent::llm {

struct ModelStats {
  std::string name;
  uint64_t calls = 0;        // HTTP calls answered (retries included)
  uint64_t call_errors = 0;  // calls that failed (deadline, HTTP error, bad JSON)
  uint64_t proposals = 0;    // candidates sent to the coordinator
  uint64_t repairs = 0;      // of which repairs of a failed child
  uint64_t rejected = 0;     // replies refused by the agent (no code, bad params, ...)
  uint64_t duplicates = 0;   // replies equal to something already proposed or a parent
  uint64_t accepted = 0;     // proposals later seen as parents (kept by the search)
  uint64_t failed = 0;       // proposals reported back as failed children
  uint64_t input_tokens = 0;
  uint64_t output_tokens = 0;
  double cost_usd = 0;
};

class ModelBandit {
 public:
  ModelBandit(std::vector<std::string> names, double min_cost_per_call_usd, uint64_t seed);

  // Index of the model to ask next.
  size_t pick();

  // Updates the statistics of model `i` under the lock.
  template <class F>
  void update(size_t i, F&& f) {
    std::lock_guard<std::mutex> lock(mu_);
    f(stats_[i]);
  }
  std::vector<ModelStats> snapshot() const;
  nlohmann::json to_json() const;  // {"models": [{name, calls, ..., accepted_per_usd}, ...]}

 private:
  mutable std::mutex mu_;
  std::vector<ModelStats> stats_;
  double min_cost_per_call_usd_;
  std::mt19937_64 rng_;
};

}  // namespace kiln::agent::llm
