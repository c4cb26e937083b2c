// The output folder of a run (see run_outputs.h).
#include "cli/run_outputs.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "coordinator/run_observer.h"
#include "coordinator/shape_sweep.h"
#include "evaluator/result_json.h"

namespace kiln::cli {

namespace fs = std::filesystem;

Status write_outputs(const std::string& out, const std::vector<TargetSpec>& targets,
                     const std::string& backend, const coordinator::Engine& engine) {
  std::error_code ec;
  fs::create_directories(fs::path(out) / "best", ec);
  if (ec) return unavailable("creating " + out + "/best: " + ec.message());
  // What proposal agents (`kiln agent`) contributed in this process's part of the run.
  const coordinator::AgentStats& a = engine.agent_stats();
  std::ofstream(fs::path(out) / "agents.json") << nlohmann::json({{"asked", a.asked},
                                                                  {"answered", a.answered},
                                                                  {"failed", a.failed},
                                                                  {"children", a.children},
                                                                  {"duplicates", a.duplicates},
                                                                  {"rejected", a.rejected}})
                                                      .dump(2)
                                               << "\n";
  if (a.asked > 0) {
    std::fprintf(
        stderr,
        "agents: %llu proposal(s) asked, %llu answered, %llu failed; %llu child(ren) evaluated\n",
        static_cast<unsigned long long>(a.asked), static_cast<unsigned long long>(a.answered),
        static_cast<unsigned long long>(a.failed), static_cast<unsigned long long>(a.children));
  }
  nlohmann::json summary = nlohmann::json::array();
  for (const auto& r : engine.reports()) {
    nlohmann::json j = coordinator::report_json(r);
    j["backend"] = backend;
    summary.push_back(j);
    if (r.best_id.empty()) continue;
    const TargetSpec* spec = nullptr;
    for (const auto& t : targets)
      if (t.name == r.target) spec = &t;
    nlohmann::json best = j;
    best["params"] = r.best_params;
    best["source"] = r.best_source;
    if (spec && spec->backend(backend)) {
      const BackendSpec& b = *spec->backend(backend);
      const KernelSpec& k = r.best_label == "seed" || !b.tunable ? b.seed : *b.tunable;
      best["kernel"] = k.kernel_name;
      best["grid"] = {k.grid[0], k.grid[1], k.grid[2]};
      best["block"] = {k.block[0], k.block[1], k.block[2]};
      best["shared_bytes"] = k.shared_bytes;
      // The shape it was timed at: a sweep's, else the backend's benchmark shape.
      Result<Shape> swept = coordinator::parse_shape_label(r.shape);
      best["benchmark_shape"] =
          r.shape.empty() || !swept.is_ok() ? spec->benchmark_for(backend) : *swept;
      // What `kiln export` checks and bakes in: the spec the run searched and the dtype it timed.
      best["spec_hash"] = spec->spec_hash;
      best["dtype"] = std::string(dtype_name(b.dtypes.front()));
    }
    for (const auto& res : engine.results()) {
      if (res.candidate_id == r.best_id && res.outcome == proto::Outcome::kVerified) {
        best["verification"] = eval::result_to_json(res);  // the last verified run of it
      }
    }
    std::ofstream(fs::path(out) / "best" /
                  (coordinator::unit_key(r.target, r.gpu_model, r.shape) + ".json"))
        << best.dump(2) << "\n";
  }
  std::ofstream(fs::path(out) / "summary.json") << summary.dump(2) << "\n";
  // The run itself, and what LLM models cost and gained as this coordinator saw it (for `kiln
  // report`, docs/report.md).
  std::ofstream(fs::path(out) / "run.json")
      << nlohmann::json({{"run_id", engine.record().id},
                         {"backend", backend},
                         {"state", engine.finished() ? "finished" : "stopped"},
                         {"spent_s", engine.search_seconds()}})
             .dump(2)
      << "\n";
  if (!engine.llm_use().empty()) {
    std::ofstream(fs::path(out) / "llm-usage.json")
        << nlohmann::json({{"models", coordinator::llm_use_json(engine)}}).dump(2) << "\n";
  }
  std::ofstream all(fs::path(out) / "results.jsonl");
  for (const auto& res : engine.results()) {
    nlohmann::json row = eval::result_to_json(res);
    // What the search made of it: whose result, with which parameters, and whether it was the
    // seed, a child or a re-time (a kept child timed again: the one designed repeat of a
    // candidate).
    if (const coordinator::Engine::ResultContext* c = engine.context_of(res.task_id)) {
      row["target"] = c->target;
      row["gpu_model"] = c->gpu_model;
      if (!c->shape.empty()) row["shape"] = c->shape;
      row["params"] = c->params;
      row["kind"] = std::string(coordinator::task_kind_name(c->kind));
      row["retime"] = c->kind == coordinator::TaskKind::kRetime;
      row["verdict"] = std::string(coordinator::verdict_name(c->verdict));
      row["source_sha256"] = c->source_sha256;
      row["parent"] = c->parent_id;
      row["op"] = c->op;
      row["island"] = c->island;
      if (!c->model.empty()) row["model"] = c->model;
      if (c->at_s >= 0) row["at_s"] = c->at_s;
    }
    all << row.dump() << "\n";
  }
  return Status::ok();
}

}  // namespace kiln::cli
