// Loads a run's output folder (see run_folder.h). Every field is read leniently (a missing or
// mistyped field is left at its default): folders written by older kilns lack the newer fields,
// and a report of what is there beats no report. Only a file that does not parse is an error.
#include "report/run_folder.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "report/format.h"
#include "shared/bounded_file.h"
#include "shared/json_fields.h"

namespace kiln::report {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string str(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : "";
}

double num(const json& j, const char* key, double fallback = 0) {
  auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : fallback;
}

uint64_t count(const json& j, const char* key) {
  const double v = num(j, key);
  return v > 0 ? static_cast<uint64_t>(v) : 0;
}

const json& object(const json& j, const char* key) {
  static const json empty = json::object();
  auto it = j.find(key);
  return it != j.end() && it->is_object() ? *it : empty;
}

// Parameters are strings in the run's files; a hand-written number is taken as its text.
std::map<std::string, std::string> params(const json& j) {
  std::map<std::string, std::string> out;
  for (const auto& [k, v] : object(j, "params").items())
    out[k] = v.is_string() ? v.get<std::string>() : v.dump();
  return out;
}

// A folder opens, and the first read then throws; a device or fifo (a link to /dev/zero) is read
// without end: refused before.
Status not_a_folder(const fs::path& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    return invalid_argument(path.string() + " is a folder, where kiln writes a file");
  }
  if (fs::exists(path, ec) && !fs::is_regular_file(path, ec)) {
    return invalid_argument(path.string() + " is not a regular file, where kiln writes one");
  }
  return Status::ok();
}

Result<json> read_json(const fs::path& path) {
  KILN_ASSIGN_OR_RETURN(std::string text,
                        read_bounded_file(path.string(), {kMaxJsonFileBytes, "a JSON file"}));
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded()) {
    return data_loss(path.string() +
                     " is not valid JSON: the file is damaged or was cut short; restore it or "
                     "remove it");
  }
  return j;
}

// Why a result did not verify, in one line: the first failed stage, else the log's first line.
std::string failure_text(const json& row) {
  auto it = row.find("stages");
  if (it != row.end() && it->is_array()) {
    for (const auto& s : *it) {
      if (!s.is_object()) continue;
      auto passed = s.find("passed");
      if (passed != s.end() && passed->is_boolean() && !passed->get<bool>()) {
        const std::string detail = str(s, "detail");
        return str(s, "name") + (detail.empty() ? "" : ": " + detail);
      }
    }
  }
  return first_line(str(row, "log"), 1000);
}

ResultRow parse_row_json(const json& j) {
  ResultRow r;
  r.at_s = num(j, "at_s", -1);
  r.target = str(j, "target");
  r.gpu_model = str(j, "gpu_model");
  r.shape = str(j, "shape");  // the sweep's label (the evaluator's own echo is an object)
  r.task_id = str(j, "task_id");
  r.candidate_id = str(j, "candidate_id");
  r.kind = str(j, "kind");
  r.verdict = str(j, "verdict");
  r.outcome = str(j, "outcome");
  r.median_us = num(object(j, "timing"), "median_us");
  r.parent_id = str(j, "parent");
  r.op = str(j, "op");
  r.model = str(j, "model");
  r.params = params(j);
  r.evaluator = str(j, "evaluator");
  r.wall_s = num(j, "wall_ms") / 1000;
  const json& m = object(j, "metrics");
  r.bytes_per_s = num(m, "bytes_per_s");
  r.flops_per_s = num(m, "flops_per_s");
  r.peak_bytes_per_s = num(m, "peak_bytes_per_s");
  r.peak_flops_per_s = num(m, "peak_flops_per_s");
  r.fraction_of_floor = num(m, "fraction_of_floor");
  if (r.outcome != "verified") r.failure = failure_text(j);
  return r;
}

Status read_summary(const fs::path& path, RunData& run) {
  KILN_ASSIGN_OR_RETURN(json j, read_json(path));
  if (!j.is_array())
    return data_loss(path.string() + " is not a JSON array of targets: the file is damaged");
  for (size_t i = 0; i < j.size(); ++i) {
    const json& e = j[i];
    if (!e.is_object()) {
      return data_loss(path.string() + ": entry " + std::to_string(i + 1) +
                       " is not a JSON object: the file is damaged");
    }
    UnitSummary u;
    u.target = str(e, "target");
    u.gpu_model = str(e, "gpu_model");
    u.shape = str(e, "shape");
    u.state = str(e, "state");
    u.evaluations = count(e, "evaluations");
    u.failures = count(e, "failures");
    u.accepted = count(e, "accepted");
    u.seed_us = num(e, "seed_us");
    u.best_us = num(e, "best_us");
    u.fraction_of_floor = num(e, "fraction_of_floor");
    u.best_id = str(e, "best_id");
    u.best_label = str(e, "best");
    if (run.backend.empty()) run.backend = str(e, "backend");
    run.units.push_back(std::move(u));
  }
  return Status::ok();
}

// best/<target>[@model].json: the best's parameters (summary.json has only its label).
Status read_best(const fs::path& dir, RunData& run) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return Status::ok();  // a run that found no best yet
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (e.path().extension() != ".json") continue;
    KILN_ASSIGN_OR_RETURN(json j, read_json(e.path()));
    if (!j.is_object()) return data_loss(e.path().string() + " is not a JSON object");
    for (auto& u : run.units) {
      if (u.target == str(j, "target") && u.gpu_model == str(j, "gpu_model") &&
          u.shape == str(j, "shape"))
        u.best_params = params(j);
    }
  }
  return Status::ok();
}

Status read_results(const fs::path& path, RunData& run) {
  KILN_RETURN_IF_ERROR(not_a_folder(path));
  std::ifstream in(path);
  if (!in) return not_found("cannot read " + path.string());
  std::string line;
  for (size_t n = 1; std::getline(in, line); ++n) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    json j = json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object()) {
      return data_loss(path.string() + " line " + std::to_string(n) +
                       " is not a JSON object (a run cut short mid-line leaves one): remove "
                       "the line, or restore the file");
    }
    run.rows.push_back(parse_row_json(j));
  }
  // Older kilns wrote no target per result; with one target in the run, every result is its.
  if (run.units.size() == 1) {
    for (auto& r : run.rows) {
      if (r.target.empty()) {
        r.target = run.units[0].target;
        r.gpu_model = run.units[0].gpu_model;
        r.shape = run.units[0].shape;
      }
    }
  }
  return Status::ok();
}

Status read_run_info(const fs::path& path, RunData& run) {
  KILN_ASSIGN_OR_RETURN(json j, read_json(path));
  if (!j.is_object()) return data_loss(path.string() + " is not a JSON object");
  run.run_id = str(j, "run_id");
  if (!str(j, "backend").empty()) run.backend = str(j, "backend");
  run.state = str(j, "state");
  run.spent_s = num(j, "spent_s");
  return Status::ok();
}

Status read_llm_usage(const fs::path& path, RunData& run) {
  KILN_ASSIGN_OR_RETURN(json j, read_json(path));
  auto it = j.is_object() ? j.find("models") : j.end();
  if (!j.is_object() || it == j.end() || !it->is_array())
    return data_loss(path.string() + " has no \"models\" array");
  for (const auto& m : *it) {
    if (!m.is_object()) continue;
    ModelUse u;
    u.model = str(m, "model");
    u.calls = count(m, "calls");
    u.input_tokens = count(m, "input_tokens");
    u.output_tokens = count(m, "output_tokens");
    u.cost_usd = num(m, "cost_usd");
    u.accepted = count(m, "accepted");
    run.llm.push_back(std::move(u));
  }
  return Status::ok();
}

}  // namespace

Result<RunData> load_run_folder(const std::string& dir) {
  const fs::path root(dir);
  std::error_code ec;
  if (!fs::is_directory(root, ec)) {
    return not_found(dir +
                     " is not a folder: pass the output folder of a run (kiln report --run DIR, "
                     "where DIR is what `kiln run --out` was given; its default is kiln-run)");
  }
  for (const char* file : {"summary.json", "results.jsonl"}) {
    if (!fs::exists(root / file, ec)) {
      return not_found(dir + " is not a kiln run folder: it has no " + file +
                       ". Pass the folder that `kiln run --out DIR` wrote (kiln report --run "
                       "DIR); a run writes summary.json and results.jsonl when it ends or is "
                       "stopped with Ctrl-C");
    }
  }
  RunData run;
  run.source = dir;
  run.export_args = "--out " + shell_word(dir);
  // run.json first: its backend wins over the one summary.json repeats per target.
  if (fs::exists(root / "run.json", ec))
    KILN_RETURN_IF_ERROR(read_run_info(root / "run.json", run));
  KILN_RETURN_IF_ERROR(read_summary(root / "summary.json", run));
  KILN_RETURN_IF_ERROR(read_best(root / "best", run));
  KILN_RETURN_IF_ERROR(read_results(root / "results.jsonl", run));
  if (fs::exists(root / "llm-usage.json", ec))
    KILN_RETURN_IF_ERROR(read_llm_usage(root / "llm-usage.json", run));
  return run;
}

ResultRow result_row_from_json(const nlohmann::json& row) { return parse_row_json(row); }

}  // namespace kiln::report
