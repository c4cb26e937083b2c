// kiln's run configuration: one JSON file (configs/*.json) read strictly -- unknown keys and wrong
// types are errors naming the field and the file. Command-line flags override file values.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "shared/logging.h"
#include "shared/status.h"

namespace kiln {

struct RedisConfig {
  std::string url;              // empty: `kiln run` starts a private redis-server
  std::string username;         // ACL user (empty: default user)
  std::string password;         // or $KILN_REDIS_PASSWORD, so secrets stay out of files
  uint32_t connect_timeout_ms = 2000;
  uint32_t command_timeout_ms = 5000;
};

struct CoordinatorConfig {
  std::string bind = "tcp://127.0.0.1:5555";  // ZeroMQ ROUTER endpoint
  uint32_t http_port = 8780;                   // status page and /metrics (0: off)
  uint32_t heartbeat_interval_ms = 1000;
  uint32_t heartbeat_liveness = 3;
  uint32_t task_deadline_ms = 120000;          // a lease not answered by then is re-queued
};

struct EvaluatorConfig {
  std::vector<std::string> backends = {"cuda", "cpu"};
  uint32_t compile_threads = 4;
  std::string cache_dir;                       // empty: <work dir>/cache
  uint32_t phase_timeout_ms = 30000;           // the sandbox watchdog per phase
  double target_noise_rel = 0.005;             // stop timing when noise is below this
  uint32_t max_timing_ms = 1000;               // ... or after this long
};

struct SearchConfig {
  uint32_t islands = 2;
  uint32_t population = 8;                     // elites kept per island
  uint32_t max_proposals_without_gain = 64;    // convergence
  double min_gain_rel = 0.01;                  // acceptance: faster than parent by max(this, noise)
  uint32_t time_budget_s = 0;                  // 0: no budget
  double rank_alpha = 1.0;                     // selection: weight 1 / (rank + 1)^alpha ...
  double children_beta = 1.0;                  // ... and 1 / (1 + children)^beta
  uint32_t migration_interval = 16;            // accepted children between migrations (0: never)
  double floor_fraction = 0;                   // convergence: best reaches this fraction of the floor (0: off)
  double speedup_target = 0;                   // convergence: seed / best reaches this (0: off)
  // The keys the file named (the others hold the defaults above): a resume keeps the run's own
  // value of what a file does not say.
  std::set<std::string> named;
};

struct KilnConfig {
  std::string work_dir = "kiln-work";
  std::vector<std::string> targets;            // empty: every built-in target
  std::string targets_dir;                     // empty: the built-in targets/ folder
  RedisConfig redis;
  CoordinatorConfig coordinator;
  EvaluatorConfig evaluator;
  SearchConfig search;
  LogOptions log;
};

// Reads `path` over the defaults above. Errors name the file and the field.
Result<KilnConfig> load_config(const std::string& path);

// Parses a config from JSON text (`source` names it in errors).
Result<KilnConfig> parse_config(const std::string& json_text, const std::string& source);

}  // namespace kiln
