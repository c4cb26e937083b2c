// What `kiln run` and `kiln coordinator` were asked (run_options.cc defines their options), and
// the search both run (run_cmd.cc).
#pragma once

#include <cstdint>
#include <set>
#include <string>

#include "cli/curve_options.h"

namespace kiln::cli {

struct RunArgs {
  std::string targets;
  std::string backend;
  std::string gpus;
  std::string budget = "10m";
  std::string redis_retry = "5m";  // how long commands wait for a Redis that went away
  std::string redis;
  std::string out = "kiln-run";
  std::string targets_dir;
  std::string cache_dir;
  uint32_t evaluators = 1;
  uint32_t patience = 64;
  uint32_t islands = 2;
  uint64_t seed = 1;
  bool resume = false;
  bool resume_if_any = false;  // --resume when a run is recorded, else a new run
  std::string config;          // a run configuration file (configs/run.example.json)
  std::set<std::string>
      given;  // options named on the command line or set by --config (a resume keeps the others)
  // `kiln coordinator`: no local evaluators; workers connect to `bind` from anywhere.
  bool coordinator_mode = false;
  std::string bind = "tcp://0.0.0.0:5555";
  uint32_t in_flight = 8;
  // `kiln coordinator`: "auto" (a population per GPU model of the evaluators that connect),
  // "any" (one population fed by every evaluator), or a comma-separated list of models.
  std::string gpu_models = "auto";
  std::string plan;            // kiln profile's plan.json: target weights
  std::string shapes;          // a shape sweep file (docs/run.md "Shape sweeps")
  bool no_transfer = false;    // sweep populations start cold (no neighbours' bests)
  bool no_early_stop = false;  // every child timed in full
  std::string llm;             // LLM agent config: started beside the built-in proposer
  bool no_profile_guidance = false;
  CoordinatorCurveArgs curve;       // --curve-secret, --allow, --insecure (docs/security.md)
  std::string redis_password_file;  // --redis-password-file
  // --http HOST:PORT: /status, /metrics, /healthz, /readyz and a live page (docs/observe.md);
  // "off" or "": none. Off by default on `kiln run`, on (loopback) on `kiln coordinator`.
  std::string http;
};

// Runs the search `args` describes to its end, as `kiln run` or `kiln coordinator`; the exit code.
int run_search(const RunArgs& args);

}  // namespace kiln::cli
