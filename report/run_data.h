// What `kiln report` knows of a run, whichever way it was read (a run's output folder or its
// Redis): every result with what the search made of it, every target's standing, the LLM models'
// use. The loaders (run_folder.h, run_redis.h) fill it; the renderers (html.h, markdown.h) only
// read it. See docs/report.md.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace kiln::report {

// One evaluation result, in arrival order.
struct ResultRow {
  double at_s = -1;  // search seconds since the run began when it arrived; < 0 when not recorded
  std::string target;
  std::string gpu_model;  // the population's GPU model; "" for any
  std::string shape;      // the population's sweep shape ("M=512,N=4096"); "" for none
  std::string task_id;
  std::string candidate_id;
  std::string kind;       // "seed", "child" or "retime"
  std::string verdict;    // "baseline", "kept", "reverted", "crowned", "crown rejected", "failed"
  std::string outcome;    // "verified", "compile_error", "wrong_answer", ...
  double median_us = 0;   // 0 when it was not timed
  std::string parent_id;  // "" for a seed
  std::string op;         // the operator that made it ("seed", "mutate", "llm rewrite", ...)
  std::string model;      // the LLM model that wrote it; "" when no LLM did
  std::map<std::string, std::string> params;
  std::string evaluator;        // the worker id that evaluated it
  double wall_s = 0;            // the evaluator's wall time for the task
  double bytes_per_s = 0;       // achieved, when timed
  double flops_per_s = 0;       // achieved, when timed
  double peak_bytes_per_s = 0;  // the evaluator's measured ceilings (0: unknown)
  double peak_flops_per_s = 0;
  double fraction_of_floor = 0;
  std::string failure;  // for a result that did not verify: the first failed stage and why
};

// A target on one GPU model: its standing at the end (or now).
struct UnitSummary {
  std::string target;
  std::string gpu_model;
  std::string shape;  // the sweep shape it was searched at ("M=512,N=4096"); "" for none
  std::string state;  // "converged: ...", "searching", ...
  uint64_t evaluations = 0;
  uint64_t failures = 0;
  uint64_t accepted = 0;
  double seed_us = 0;
  double best_us = 0;
  double fraction_of_floor = 0;
  std::string best_id;
  std::string best_label;  // "seed" or "template BLOCK=256,VEC=8"
  std::map<std::string, std::string> best_params;
};

// What one LLM model did over the run.
struct ModelUse {
  std::string model;
  uint64_t calls = 0;
  uint64_t input_tokens = 0;
  uint64_t output_tokens = 0;
  double cost_usd = 0;
  uint64_t accepted = 0;  // children it wrote that were kept
};

struct RunData {
  std::string source;  // the folder or the Redis URL it was read from, as shown
  std::string run_id;
  std::string backend;
  std::string state;   // "running" or "finished" ("" when unknown)
  double spent_s = 0;  // search time
  std::vector<UnitSummary> units;
  std::vector<ResultRow> rows;
  std::vector<ModelUse> llm;
  // What `kiln export` needs besides the target to find the run: "--out DIR" or "--redis URL".
  std::string export_args;
};

}  // namespace kiln::report
