// A synthetic run for the report's tests: two targets on one GPU model, 28 results (seeds, kept,
// reverted, crowned, failed), two evaluators and one LLM model; and a writer that lays it out as
// a `kiln run --out` folder. The expected figures are written out by hand in the tests, not
// computed with the code under test.
//
// rmsnorm (bandwidth-bound), 16 results, 12 timed, 4 failed, best a08 through a00 -> a01 -> a04:
//   1 a00 seed baseline 100 | 2 a01 kept 90 | 3 a01 crowned 89 | 4 a02 reverted 95
//   5 a03 compile_error | 6 a04 kept 70 (llm) | 7 a04 crowned 71 | 8 a05 wrong_answer (hostile)
//   9 a06 reverted 80 | 10 a07 wrong_answer | 11 a08 kept 50 | 12 a08 crowned 52
//   13 a09 reverted 55 (llm) | 14 a10 kept 51.5 | 15 a10 crown rejected 53 | 16 a11 timeout
// matmul (compute-bound), 12 results, 10 timed, 2 failed, best b04 through b00 -> b02:
//   1 b00 seed 400 | 2 b01 reverted 420 | 3 b02 kept 300 | 4 b02 crowned 305
//   5 b03 compile_error | 6 b04 kept 250 | 7 b04 crowned 248 | 8 b05 reverted 260
//   9 b06 compile_error | 10 b07 reverted 270 | 11 b08 reverted 290 | 12 b09 reverted 255
// The two targets' results alternate in arrival order (rmsnorm's first), one every 2 s from 1 s,
// and alternate between the evaluators gpu0@node-a and gpu1@node-a; each took 1.5 s of wall time.
#pragma once

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "report/run_data.h"

namespace kiln::testing {

constexpr const char* kModel = "NVIDIA H100 80GB HBM3";
constexpr const char* kHostile = "<script>alert(1)</script>&";

// A 64-character candidate id whose first 12 characters are unique: "a01ccccccccc...".
inline std::string cand(const std::string& name) {
  return name.empty() ? "" : name + std::string(64 - name.size(), 'c');
}

inline report::ResultRow sample_row(const std::string& target, const std::string& id,
                                    const std::string& kind, const std::string& verdict, double us,
                                    const std::string& parent, const std::string& op,
                                    const std::string& outcome = "verified",
                                    const std::string& failure = "") {
  report::ResultRow r;
  r.target = target;
  r.gpu_model = kModel;
  r.candidate_id = cand(id);
  r.task_id = "t-" + id + "-" + kind;
  r.kind = kind;
  r.verdict = verdict;
  r.outcome = outcome;
  r.median_us = us;
  r.parent_id = cand(parent);
  r.op = op;
  r.model = op == "llm rewrite" ? "claude-test" : "";
  r.failure = failure;
  r.peak_bytes_per_s = 3.35e12;
  r.peak_flops_per_s = 9.89e14;
  if (us > 0) {
    const bool bw = target == "rmsnorm";
    const double bytes = bw ? 67108864.0 : 1e8;
    const double flops = bw ? 1e7 : 2.0 * 4096 * 4096 * 4096;
    r.bytes_per_s = bytes / (us * 1e-6);
    r.flops_per_s = flops / (us * 1e-6);
  }
  if (r.kind != "seed") r.params = {{"BLOCK", "256"}};
  return r;
}

inline report::RunData sample_run() {
  using report::ResultRow;
  const std::vector<ResultRow> a = {
      sample_row("rmsnorm", "a00", "seed", "baseline", 100, "", "seed"),
      sample_row("rmsnorm", "a01", "child", "kept", 90, "a00", "mutate"),
      sample_row("rmsnorm", "a01", "retime", "crowned", 89, "a00", "mutate"),
      sample_row("rmsnorm", "a02", "child", "reverted", 95, "a01", "mutate"),
      sample_row("rmsnorm", "a03", "child", "failed", 0, "a01", "mutate", "compile_error",
                 "compile: kernel.cu(3): error: expected a \";\""),
      sample_row("rmsnorm", "a04", "child", "kept", 70, "a01", "llm rewrite"),
      sample_row("rmsnorm", "a04", "retime", "crowned", 71, "a01", "llm rewrite"),
      sample_row("rmsnorm", "a05", "child", "failed", 0, "a04", "mutate", "wrong_answer",
                 std::string("sweep: ") + kHostile),
      sample_row("rmsnorm", "a06", "child", "reverted", 80, "a04", "mutate"),
      sample_row("rmsnorm", "a07", "child", "failed", 0, "a04", "crossover", "wrong_answer",
                 "sweep: max rel error 0.5 at M=33,N=4096"),
      sample_row("rmsnorm", "a08", "child", "kept", 50, "a04", "mutate"),
      sample_row("rmsnorm", "a08", "retime", "crowned", 52, "a04", "mutate"),
      sample_row("rmsnorm", "a09", "child", "reverted", 55, "a08", "llm rewrite"),
      sample_row("rmsnorm", "a10", "child", "kept", 51.5, "a08", "mutate"),
      sample_row("rmsnorm", "a10", "retime", "crown rejected", 53, "a08", "mutate"),
      sample_row("rmsnorm", "a11", "child", "failed", 0, "a08", "mutate", "timeout",
                 "timing: timed out after 10 s"),
  };
  const std::vector<ResultRow> b = {
      sample_row("matmul", "b00", "seed", "baseline", 400, "", "seed"),
      sample_row("matmul", "b01", "child", "reverted", 420, "b00", "mutate"),
      sample_row("matmul", "b02", "child", "kept", 300, "b00", "mutate"),
      sample_row("matmul", "b02", "retime", "crowned", 305, "b00", "mutate"),
      sample_row("matmul", "b03", "child", "failed", 0, "b02", "mutate", "compile_error",
                 "compile: ptxas error: too many registers"),
      sample_row("matmul", "b04", "child", "kept", 250, "b02", "mutate"),
      sample_row("matmul", "b04", "retime", "crowned", 248, "b02", "mutate"),
      sample_row("matmul", "b05", "child", "reverted", 260, "b04", "mutate"),
      sample_row("matmul", "b06", "child", "failed", 0, "b04", "mutate", "compile_error",
                 "compile: error: identifier \"TILE\" is undefined"),
      sample_row("matmul", "b07", "child", "reverted", 270, "b04", "crossover"),
      sample_row("matmul", "b08", "child", "reverted", 290, "b04", "mutate"),
      sample_row("matmul", "b09", "child", "reverted", 255, "b04", "mutate"),
  };
  report::RunData run;
  run.source = "/runs/night1";
  run.run_id = "run-20250101-0001";
  run.backend = "cuda";
  run.state = "finished";
  run.spent_s = 60;
  run.export_args = "--out /runs/night1";
  size_t ia = 0, ib = 0;
  while (ia < a.size() || ib < b.size()) {
    for (const std::vector<ResultRow>* v : {&a, &b}) {
      size_t& i = v == &a ? ia : ib;
      if (i >= v->size()) continue;
      ResultRow r = (*v)[i++];
      r.at_s = 1 + 2.0 * run.rows.size();
      r.evaluator = run.rows.size() % 2 == 0 ? "gpu0@node-a" : "gpu1@node-a";
      r.wall_s = 1.5;
      run.rows.push_back(r);
    }
  }
  report::UnitSummary ua;
  ua.target = "rmsnorm";
  ua.gpu_model = kModel;
  ua.state = "converged: 40 proposals without a new best";
  ua.evaluations = 16;
  ua.failures = 4;
  ua.accepted = 4;
  ua.seed_us = 100;
  ua.best_us = 52;
  ua.fraction_of_floor = 0.4;
  ua.best_id = cand("a08");
  ua.best_label = "template BLOCK=256,VEC=8";
  ua.best_params = {{"BLOCK", "256"}, {"VEC", "8"}};
  report::UnitSummary ub;
  ub.target = "matmul";
  ub.gpu_model = kModel;
  ub.state = "stopped: time budget spent";
  ub.evaluations = 12;
  ub.failures = 2;
  ub.accepted = 2;
  ub.seed_us = 400;
  ub.best_us = 248;
  ub.fraction_of_floor = 0.56;
  ub.best_id = cand("b04");
  ub.best_label = "template TILE=128";
  ub.best_params = {{"TILE", "128"}};
  run.units = {ua, ub};
  run.llm = {{"claude-test", 5, 12000, 3400, 0.42, 1}};
  return run;
}

// Lays `run` out as `kiln run --out` does (summary.json, best/, results.jsonl) plus run.json and
// llm-usage.json. A failure text "stage: detail" becomes a failed stage of that name.
inline void write_run_folder(const report::RunData& run, const std::string& dir) {
  namespace fs = std::filesystem;
  using nlohmann::json;
  fs::create_directories(fs::path(dir) / "best");
  json summary = json::array();
  for (const auto& u : run.units) {
    json j = {{"target", u.target},     {"gpu_model", u.gpu_model},
              {"state", u.state},       {"evaluations", u.evaluations},
              {"failures", u.failures}, {"accepted", u.accepted},
              {"seed_us", u.seed_us},   {"best_us", u.best_us},
              {"best_id", u.best_id},   {"best", u.best_label},
              {"backend", run.backend}, {"fraction_of_floor", u.fraction_of_floor}};
    summary.push_back(j);
    j["params"] = u.best_params;
    std::string key = u.target;
    if (!u.gpu_model.empty()) {
      key += "@";
      for (char c : u.gpu_model) key += (c == ' ' ? '_' : c);
    }
    std::ofstream(fs::path(dir) / "best" / (key + ".json")) << j.dump(2) << "\n";
  }
  std::ofstream(fs::path(dir) / "summary.json") << summary.dump(2) << "\n";
  std::ofstream rows(fs::path(dir) / "results.jsonl");
  for (const auto& r : run.rows) {
    json stages = json::array({{{"name", "scan"}, {"passed", true}, {"detail", ""}}});
    if (!r.failure.empty()) {
      const size_t colon = r.failure.find(": ");
      stages.push_back({{"name", r.failure.substr(0, colon)},
                        {"passed", false},
                        {"detail", colon == std::string::npos ? "" : r.failure.substr(colon + 2)}});
    }
    json j = {{"task_id", r.task_id},
              {"candidate_id", r.candidate_id},
              {"outcome", r.outcome},
              {"timing", {{"median_us", r.median_us}, {"samples", 30}}},
              {"wall_ms", r.wall_s * 1000},
              {"metrics",
               {{"bytes_per_s", r.bytes_per_s},
                {"flops_per_s", r.flops_per_s},
                {"peak_bytes_per_s", r.peak_bytes_per_s},
                {"peak_flops_per_s", r.peak_flops_per_s},
                {"fraction_of_floor", r.fraction_of_floor}}},
              {"stages", stages},
              {"log", ""},
              {"evaluator", r.evaluator},
              {"target", r.target},
              {"gpu_model", r.gpu_model},
              {"params", r.params},
              {"kind", r.kind},
              {"verdict", r.verdict},
              {"at_s", r.at_s},
              {"parent", r.parent_id},
              {"op", r.op},
              {"model", r.model}};
    rows << j.dump() << "\n";
  }
  std::ofstream(fs::path(dir) / "run.json") << json({{"run_id", run.run_id},
                                                     {"backend", run.backend},
                                                     {"state", run.state},
                                                     {"spent_s", run.spent_s}})
                                                   .dump(2)
                                            << "\n";
  json models = json::array();
  for (const auto& m : run.llm) {
    models.push_back({{"model", m.model},
                      {"calls", m.calls},
                      {"input_tokens", m.input_tokens},
                      {"output_tokens", m.output_tokens},
                      {"cost_usd", m.cost_usd},
                      {"accepted", m.accepted}});
  }
  std::ofstream(fs::path(dir) / "llm-usage.json") << json({{"models", models}}).dump(2) << "\n";
}

}  // namespace kiln::testing
