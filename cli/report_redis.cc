#include "cli/report_redis.h"

#include <map>
#include <nlohmann/json.hpp>

#include "cli/status_table.h"
#include "coordinator/run_record.h"
#include "coordinator/search_log.h"
#include "evaluator/result_json.h"
#include "report/run_folder.h"

namespace kiln::cli {

Result<report::RunData> load_run_redis(redis::Store& store, const std::string& source) {
  KILN_ASSIGN_OR_RETURN(std::optional<coordinator::RunRecord> rec,
                        coordinator::read_run_record(store));
  if (!rec) {
    return not_found("no kiln run is recorded in " + source +
                     " (kiln:run is missing): pass the Redis a `kiln run` or `kiln coordinator` "
                     "used, or the run's folder");
  }
  report::RunData run;
  run.source = source;
  run.run_id = rec->id;
  run.backend = rec->backend;
  run.state = rec->state;
  run.spent_s = rec->spent_s;
  run.export_args = "--redis " + source;

  // The search log, in order: a submit says what a task evaluates (lineage, parameters, model),
  // the result entry what came back and what the search made of it.
  std::map<std::string, coordinator::SubmitEvent> submits;  // by task id
  std::map<std::string, uint64_t> accepted;                 // kept children per LLM model
  std::string after;
  while (true) {
    KILN_ASSIGN_OR_RETURN(std::vector<redis::StreamEvent> batch,
                          store.read_events(rec->id, after, 1000));
    if (batch.empty()) break;
    for (const redis::StreamEvent& entry : batch) {
      after = entry.id;
      Result<std::optional<coordinator::SearchEvent>> parsed =
          coordinator::parse_search_event(entry.fields);
      if (!parsed.is_ok()) return parsed.status().with_context("search log entry " + entry.id);
      if (!*parsed) continue;  // an entry type of a newer kiln
      if (auto* s = std::get_if<coordinator::SubmitEvent>(&**parsed)) {
        submits[s->task] = *s;
        continue;
      }
      auto* r = std::get_if<coordinator::ResultEvent>(&**parsed);
      if (r == nullptr) continue;
      nlohmann::json row = eval::result_to_json(r->result);
      row["target"] = r->target;
      row["gpu_model"] = r->gpu_model;
      if (!r->shape.empty()) row["shape"] = r->shape;
      row["kind"] = std::string(coordinator::task_kind_name(r->kind));
      row["verdict"] = std::string(coordinator::verdict_name(r->verdict));
      if (r->at_s >= 0) row["at_s"] = r->at_s;
      if (auto it = submits.find(r->result.task_id); it != submits.end()) {
        const coordinator::SubmitEvent& s = it->second;
        row["params"] = s.params;
        row["parent"] = s.parent;
        row["op"] = s.kind == coordinator::TaskKind::kSeed ? "seed" : s.op;
        if (!s.model.empty()) row["model"] = s.model;
        if (!s.model.empty() && r->kind == coordinator::TaskKind::kChild &&
            r->verdict == coordinator::Verdict::kKept)
          ++accepted[s.model];
      }
      run.rows.push_back(report::result_row_from_json(row));
    }
  }

  KILN_ASSIGN_OR_RETURN(auto statuses, store.target_statuses());
  for (const auto& [name, fields] : statuses) {
    const coordinator::TargetReport t = report_from_fields(name, fields);
    report::UnitSummary u;
    u.target = t.target;
    u.gpu_model = t.gpu_model;
    u.shape = t.shape;
    u.state = t.state;
    u.evaluations = t.evaluations;
    u.failures = t.failures;
    u.accepted = t.accepted;
    u.seed_us = t.seed_us;
    u.best_us = t.best_us;
    u.fraction_of_floor = t.fraction_of_floor;
    u.best_id = t.best_id;
    u.best_label = t.best_label;
    u.best_params = t.best_params;
    // The best's parameters when the status has none: its verified result row has them.
    for (const report::ResultRow& row : run.rows) {
      if (u.best_params.empty() && row.candidate_id == u.best_id) u.best_params = row.params;
    }
    run.units.push_back(std::move(u));
  }
  // Calls, tokens and cost are counted by the coordinator process (the folder's llm-usage.json);
  // the log keeps which model wrote each kept child.
  for (const auto& [model, n] : accepted) run.llm.push_back({model, 0, 0, 0, 0, n});
  return run;
}

}  // namespace kiln::cli
