// The run's record: see run_record.h.
#include "coordinator/run_record.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <set>

#include "coordinator/search.h"
#include "coordinator/stored_fields.h"

namespace kiln::coordinator {
namespace {

std::string join(const std::vector<std::string>& items) {
  std::string s;
  for (const auto& i : items) s += (s.empty() ? "" : ",") + i;
  return s;
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size() && !s.empty()) {
    size_t comma = s.find(',', start);
    if (comma == std::string::npos) comma = s.size();
    if (comma > start) out.push_back(s.substr(start, comma - start));
    start = comma + 1;
  }
  return out;
}

// The GPU models of a run as a JSON array of names ("" for any evaluator of the backend).
std::string join_models(const std::vector<std::string>& models) {
  return nlohmann::json(models).dump();
}

Result<std::vector<std::string>> split_models(const std::string& text) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  std::vector<std::string> out;
  if (!j.is_array()) return data_loss("field gpu_models '" + text + "' is not a JSON array");
  for (const auto& m : j) {
    if (!m.is_string()) return data_loss("field gpu_models '" + text + "' holds a non-string");
    out.push_back(m.get<std::string>());
  }
  return out;
}

FieldList record_fields(const RunRecord& r) {
  FieldList f = {{"id", r.id},
                 {"targets", join(r.targets)},
                 {"backend", r.backend},
                 {"gpu_models", join_models(r.gpu_models)},
                 {"toolchain", r.toolchain},
                 {"seed", std::to_string(r.seed)},
                 {"islands", std::to_string(r.islands)},
                 {"capacity", std::to_string(r.capacity)},
                 {"patience", std::to_string(r.patience)},
                 {"budget_s", std::to_string(r.budget_s)},
                 {"spent_s", exact_number(r.spent_s)},
                 {"state", r.state},
                 {"starts", std::to_string(r.starts)}};
  for (const auto& [t, h] : r.spec_hashes) f.emplace_back("spec." + t, h);
  if (!r.shapes.empty()) f.emplace_back("shapes", nlohmann::json(r.shapes).dump());
  return f;
}

}  // namespace

Result<std::optional<RunRecord>> read_run_record(redis::Store& store) {
  KILN_ASSIGN_OR_RETURN(FieldMap f, store.get_run());
  if (f.empty()) return std::optional<RunRecord>();
  RunRecord r;
  r.id = field(f, "id");
  if (r.id.empty()) return data_loss("kiln:run has no id");
  r.targets = split(field(f, "targets"));
  r.backend = field(f, "backend");
  r.toolchain = field(f, "toolchain");
  r.state = field(f, "state");
  auto fail = [&](const Status& s) { return s.with_context("kiln:run"); };
  Result<uint64_t> seed = integer_field(f, "seed");
  Result<uint64_t> islands = integer_field(f, "islands");
  Result<uint64_t> capacity = integer_field(f, "capacity");
  Result<uint64_t> patience = integer_field(f, "patience");
  Result<uint64_t> budget = integer_field(f, "budget_s");
  Result<uint64_t> starts = integer_field(f, "starts");
  Result<double> spent = number_field(f, "spent_s");
  for (const Status& s : {seed.status(), islands.status(), capacity.status(), patience.status(),
                          budget.status(), starts.status(), spent.status()}) {
    if (!s.is_ok()) return fail(s);
  }
  r.seed = *seed;
  r.islands = static_cast<uint32_t>(*islands);
  r.capacity = static_cast<uint32_t>(*capacity);
  r.patience = *patience;
  r.budget_s = static_cast<int64_t>(*budget);
  r.starts = static_cast<uint32_t>(*starts);
  r.spent_s = *spent;
  if (!std::isfinite(r.spent_s) || r.spent_s < 0) {
    return data_loss("kiln:run: field 'spent_s': " + field(f, "spent_s") +
                     " is not a number of seconds >= 0");
  }
  if (r.islands == 0 || r.islands > kMaxIslands || r.capacity == 0 || r.capacity > kMaxPopulation) {
    return data_loss("kiln:run: fields 'islands' and 'capacity' out of range (" +
                     field(f, "islands") + ", " + field(f, "capacity") + ")");
  }
  // Runs recorded before populations were per GPU model searched one population, fed by any.
  r.gpu_models = {""};
  if (f.count("gpu_models")) {
    Result<std::vector<std::string>> models = split_models(field(f, "gpu_models"));
    if (!models.is_ok()) return fail(models.status());
    r.gpu_models = *models;
  }
  for (const auto& [k, v] : f) {
    if (k.rfind("spec.", 0) == 0) r.spec_hashes[k.substr(5)] = v;
  }
  if (f.count("shapes")) {
    const std::string text = field(f, "shapes");
    nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
    bool ok = j.is_object();
    for (auto it = j.begin(); ok && it != j.end(); ++it) {
      ok = it->is_array();
      for (const auto& s : ok ? *it : nlohmann::json::array()) {
        if (!(ok = s.is_string())) break;
        r.shapes[it.key()].push_back(s.get<std::string>());
      }
    }
    if (!ok) return fail(data_loss("field shapes '" + text + "' is not an object of shape lists"));
  }
  return std::optional<RunRecord>(std::move(r));
}

Status write_run_record(redis::Store& store, const RunRecord& record) {
  return store.put_run(record_fields(record));
}

Status write_run_progress(redis::Store& store, const RunRecord& record) {
  return store.put_run({{"spent_s", exact_number(record.spent_s)}, {"state", record.state}});
}

Status write_run_gpu_models(redis::Store& store, const RunRecord& record) {
  return store.put_run({{"gpu_models", join_models(record.gpu_models)}});
}

std::string run_summary(const RunRecord& record) {
  return record.id + " (" + join(record.targets) + " on " + record.backend + ", " + record.state +
         ")";
}

Status check_same_run(const RunRecord& recorded, const RunRecord& ours, bool compare_gpu_models) {
  std::set<std::string> theirs(recorded.targets.begin(), recorded.targets.end());
  std::set<std::string> mine(ours.targets.begin(), ours.targets.end());
  if (theirs != mine) {
    std::vector<std::string> missing, added;
    for (const auto& t : theirs) {
      if (!mine.count(t)) missing.push_back(t);
    }
    for (const auto& t : mine) {
      if (!theirs.count(t)) added.push_back(t);
    }
    std::string why = "run " + recorded.id + " searches targets " + join(recorded.targets) +
                      ", this one names " + join(ours.targets);
    if (!missing.empty()) why += " (missing: " + join(missing) + ")";
    if (!added.empty()) why += " (not in the run: " + join(added) + ")";
    return failed_precondition(why);
  }
  if (recorded.backend != ours.backend) {
    return failed_precondition("run " + recorded.id + " searches on the " + recorded.backend +
                               " backend, this one on " + ours.backend);
  }
  if (recorded.toolchain != ours.toolchain) {
    return failed_precondition("run " + recorded.id + " was made by '" + recorded.toolchain +
                               "', this is '" + ours.toolchain +
                               "' (candidate ids would not match; resume it with that kiln)");
  }
  if (recorded.islands != ours.islands || recorded.capacity != ours.capacity) {
    return failed_precondition("run " + recorded.id + " has " + std::to_string(recorded.islands) +
                               " island(s) of " + std::to_string(recorded.capacity) +
                               ", this one " + std::to_string(ours.islands) + " of " +
                               std::to_string(ours.capacity));
  }
  for (const std::string& target : ours.targets) {
    auto it = recorded.spec_hashes.find(target);
    const std::string theirs_hash = it == recorded.spec_hashes.end() ? "(none)" : it->second;
    auto mine_it = ours.spec_hashes.find(target);
    const std::string mine_hash = mine_it == ours.spec_hashes.end() ? "" : mine_it->second;
    if (theirs_hash != mine_hash) {
      return failed_precondition("target " + target + " changed since run " + recorded.id +
                                 " started (spec hash " + theirs_hash.substr(0, 12) + " -> " +
                                 mine_hash.substr(0, 12) +
                                 "): its candidate ids would not match; start a new run");
    }
  }
  // The same sweep, or one that adds shapes: every recorded shape of every target is still swept
  // (the new populations start from their converged neighbours' bests).
  bool kept = recorded.shapes.empty() == ours.shapes.empty();
  for (const auto& [target, labels] : recorded.shapes) {
    auto it = ours.shapes.find(target);
    for (const std::string& label : labels) {
      kept = kept && it != ours.shapes.end() &&
             std::find(it->second.begin(), it->second.end(), label) != it->second.end();
    }
  }
  for (const auto& [target, labels] : ours.shapes) kept = kept && recorded.shapes.count(target);
  if (!kept) {
    return failed_precondition("run " + recorded.id + " sweeps shapes that this one does not (" +
                               nlohmann::json(recorded.shapes).dump() + " there, " +
                               nlohmann::json(ours.shapes).dump() +
                               " here): resume it with the same --shapes file, one that adds "
                               "shapes to it, or without one");
  }
  if (compare_gpu_models) {
    std::set<std::string> their_models(recorded.gpu_models.begin(), recorded.gpu_models.end());
    std::set<std::string> our_models(ours.gpu_models.begin(), ours.gpu_models.end());
    auto names = [](const std::set<std::string>& m) {
      std::string s;
      for (const auto& x : m)
        s += (s.empty() ? "" : ", ") + (x.empty() ? std::string("any GPU") : x);
      return s;
    };
    if (their_models != our_models) {
      return failed_precondition(
          "run " + recorded.id + " searched on " + names(their_models) + ", this one on " +
          names(our_models) + " (populations are per GPU model: resume it where those GPUs are)");
    }
  }
  return Status::ok();
}

}  // namespace kiln::coordinator
