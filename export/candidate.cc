// Finding the candidate to export: see candidate.h.
#include "export/candidate.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "evaluator/result_json.h"
#include "shared/hash.h"
#include "shared/json_fields.h"
#include "shared/protocol.h"
#include "shared/redis_keys.h"
#include "shared/redis_store.h"
#include "shared/target_path.h"

namespace kiln::exporter {
namespace fs = std::filesystem;
namespace {

// The population's name in a run: "target" or "target@model" with the model made a key component,
// as coordinator::unit_key spells it ("reduce@NVIDIA_H100_80GB_HBM3"); the best file and the
// Redis status of a population carry that name.
std::string unit_of(const std::string& target, const std::string& gpu_model) {
  return gpu_model.empty() ? target : target + "@" + redis::keys::safe_key_component(gpu_model);
}

// Chooses the population among `units` (the target's names in the run) for `sel`.
Result<std::string> pick_unit(const std::vector<std::string>& units, const RunSelection& sel,
                              const std::string& where) {
  if (units.empty()) {
    return not_found("no best kernel of '" + sel.target + "' in " + where +
                     " (has the target verified its seed yet? `kiln status` shows the run)");
  }
  if (!sel.gpu_model.empty()) {
    const std::string want = unit_of(sel.target, sel.gpu_model);
    for (const auto& u : units)
      if (u == want) return u;
    std::string have;
    for (const auto& u : units) have += " " + u;
    return not_found("no population '" + want + "' in " + where + "; it has:" + have);
  }
  if (units.size() == 1) return units[0];
  for (const auto& u : units)
    if (!sel.local_gpu_model.empty() && u == unit_of(sel.target, sel.local_gpu_model)) return u;
  std::string have;
  for (const auto& u : units) have += " " + u;
  return failed_precondition("'" + sel.target + "' was searched on several GPU models in " + where +
                             "; name one with --gpu-model (populations:" + have + ")");
}

Result<std::map<std::string, std::string>> params_from_json(const nlohmann::json& j,
                                                            const std::string& what) {
  std::map<std::string, std::string> out;
  if (j.is_null()) return out;
  if (!j.is_object()) return data_loss(what + ": params is not an object");
  for (const auto& [k, v] : j.items()) {
    out[k] = v.is_string() ? v.get<std::string>() : v.dump();
  }
  return out;
}

// Fills the parts that follow from the target: kind of geometry, kernel name, dtype.
Status complete(ExportCandidate& c, const std::string& dtype_text) {
  const BackendSpec* b = c.target.backend(c.backend);
  if (!b)
    return failed_precondition("target '" + c.target.name + "' has no " + c.backend + " kernels");
  // Template configurations carry the template's parameters; the seed and its rewrites none (or
  // only the seed's fixed defines).
  c.is_template = false;
  if (b->tunable) {
    for (const auto& [name, values] : b->tunable->space) c.is_template |= c.params.count(name) > 0;
  }
  c.kernel_name = c.geometry().kernel_name;
  c.dtype = b->dtypes.front();  // the dtype the search verifies and times
  if (!dtype_text.empty()) {
    KILN_ASSIGN_OR_RETURN(c.dtype, parse_dtype(dtype_text));
  }
  return Status::ok();
}

Result<TargetSpec> load_checked(const std::string& targets_dirs, const std::string& name,
                                const std::string& recorded_hash, const std::string& where) {
  KILN_ASSIGN_OR_RETURN(std::string dir, find_target(targets_dirs, name));
  KILN_ASSIGN_OR_RETURN(TargetSpec spec, load_target(dir));
  if (!recorded_hash.empty() && recorded_hash != spec.spec_hash) {
    return failed_precondition(
        "the target '" + name + "' in " + dir +
        " is not the one the run searched (its spec hash differs from the one " + where +
        " recorded): point --targets-dir at the folder the run used");
  }
  return spec;
}

}  // namespace

const KernelSpec& ExportCandidate::geometry() const {
  const BackendSpec& b = *target.backend(backend);
  return is_template ? *b.tunable : b.seed;
}

std::string params_text(const std::map<std::string, std::string>& params) {
  std::string out;
  for (const auto& [k, v] : params) out += (out.empty() ? "" : " ") + k + "=" + v;
  return out;
}

namespace {

// The best a run wrote for one population (best/<unit>.json): its kernel, parameters, dtype, the
// run's verification and, in a shape sweep, the shape it was timed at and its time there.
Result<ExportCandidate> read_best(const fs::path& path, const std::string& target,
                                  const std::string& targets_dirs) {
  const std::string where = path.string();
  Result<nlohmann::json> doc = load_json_file(where);
  if (!doc.is_ok()) return data_loss(doc.status().message());
  const nlohmann::json& best = *doc;
  if (!best.is_object()) return data_loss(where + " is not a JSON object");
  ExportCandidate c;
  c.backend = best.value("backend", "");
  c.gpu_model = best.value("gpu_model", "");
  KILN_ASSIGN_OR_RETURN(c.target,
                        load_checked(targets_dirs, target, best.value("spec_hash", ""), where));
  c.candidate_id = best.value("best_id", "");
  c.source = best.value("source", "");
  KILN_ASSIGN_OR_RETURN(c.params, params_from_json(best.value("params", nlohmann::json()), where));
  c.search_result = best.value("verification", nlohmann::json());
  c.origin = where;
  c.best_us = best.value("best_us", 0.0);
  if (best.contains("shape")) {  // a population of a shape sweep, timed at its benchmark_shape
    const nlohmann::json bench = best.value("benchmark_shape", nlohmann::json());
    if (!bench.is_object()) return data_loss(where + " has no benchmark_shape");
    for (const auto& [d, n] : bench.items()) {
      if (!n.is_number_integer())
        return data_loss(where + ": benchmark_shape." + d + " is not an integer");
      c.shape[d] = n.get<int64_t>();
    }
    if (Status s = check_shape(c.target, c.shape); !s.is_ok())
      return data_loss(where + ": " + s.message());
  }
  c.arch = c.search_result.is_object() ? c.search_result.value("arch", "") : "";
  KILN_RETURN_IF_ERROR(complete(c, best.value("dtype", "")));
  return c;
}

Result<ExportCandidate> best_from_file(const fs::path& path, const std::string& target,
                                       const std::string& targets_dirs) {
  return read_json_guarded(path.string(), [&] { return read_best(path, target, targets_dirs); });
}

}  // namespace

Result<std::vector<ExportCandidate>> sweep_bests_from_run_folder(const std::string& out,
                                                                 const std::string& target,
                                                                 const std::string& targets_dirs) {
  std::vector<ExportCandidate> found;
  const fs::path best_dir = fs::path(out) / "best";
  if (!fs::is_directory(best_dir)) return found;
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(best_dir)) {
    // A sweep's unit is "<target>-<shape>[@model]" (target names are identifiers: no '-').
    if (e.path().extension() == ".json" && e.path().stem().string().rfind(target + "-", 0) == 0)
      files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  for (const fs::path& f : files) {
    KILN_ASSIGN_OR_RETURN(ExportCandidate c, best_from_file(f, target, targets_dirs));
    if (c.shape.empty()) return data_loss(f.string() + " names no shape of a sweep");
    if (c.source.empty()) return data_loss(f.string() + " holds no kernel source");
    found.push_back(std::move(c));
  }
  return found;
}

Result<ExportCandidate> from_run_folder(const std::string& out, const RunSelection& sel,
                                        const std::string& targets_dirs) {
  const fs::path best_dir = fs::path(out) / "best";
  if (!fs::is_directory(best_dir)) {
    return not_found(
        out +
        " has no best/ folder: is it a `kiln run --out` folder of a run that has ended? "
        "(for a running one, pass its --redis)");
  }
  std::vector<std::string> units;
  for (const auto& e : fs::directory_iterator(best_dir)) {
    const std::string stem = e.path().stem().string();
    if (e.path().extension() == ".json" &&
        (stem == sel.target || stem.rfind(sel.target + "@", 0) == 0)) {
      units.push_back(stem);
    }
  }
  std::sort(units.begin(), units.end());
  KILN_ASSIGN_OR_RETURN(std::string unit, pick_unit(units, sel, out));
  KILN_ASSIGN_OR_RETURN(ExportCandidate c,
                        best_from_file(best_dir / (unit + ".json"), sel.target, targets_dirs));
  // A shorter prefix could match another candidate as well as the best.
  if (!sel.candidate_id.empty() && sel.candidate_id.size() < 8)
    return invalid_argument("--candidate: give at least 8 hex digits of the id");
  if (sel.candidate_id.empty() || c.candidate_id.rfind(sel.candidate_id, 0) == 0) {
    if (c.source.empty()) return data_loss(c.origin + " holds no kernel source");
    return c;
  }

  // Another candidate: its verified row in results.jsonl.
  const std::string rows_path = (fs::path(out) / "results.jsonl").string();
  std::ifstream rows(rows_path);
  std::string line;
  nlohmann::json found;
  while (std::getline(rows, line)) {
    nlohmann::json row = nlohmann::json::parse(line, nullptr, false);
    if (!row.is_object() || row.value("candidate_id", "").rfind(sel.candidate_id, 0) != 0) continue;
    if (row.value("target", "") != sel.target || row.value("gpu_model", "") != c.gpu_model)
      continue;
    if (row.value("outcome", "") == "verified") found = row;
  }
  if (found.is_null()) {
    return not_found("no verified result of candidate " + sel.candidate_id + " for " + unit +
                     " in " + rows_path);
  }
  c.candidate_id = found.value("candidate_id", "");
  KILN_ASSIGN_OR_RETURN(c.params,
                        params_from_json(found.value("params", nlohmann::json()), rows_path));
  const BackendSpec* b = c.target.backend(c.backend);
  bool templ = false;
  if (b->tunable) {
    for (const auto& [name, values] : b->tunable->space) templ |= c.params.count(name) > 0;
  }
  c.source = templ ? b->tunable->source : b->seed.source;
  // A kernel text an agent wrote is not in the folder, only its hash.
  if (found.value("source_sha256", "") != sha256_hex(c.source)) {
    return failed_precondition(
        "candidate " + sel.candidate_id +
        " is a kernel text an agent wrote; its text is in the run's Redis only: "
        "export it with --redis while the run's Redis is up");
  }
  c.search_result = found;
  c.origin = rows_path;
  c.arch = found.value("arch", "");
  c.best_us = 0;
  // Its kind of kernel follows from its parameters; the dtype stays the run's.
  KILN_RETURN_IF_ERROR(complete(c, std::string(dtype_name(c.dtype))));
  return c;
}

Result<ExportCandidate> from_redis(redis::RedisClient& client, const RunSelection& sel,
                                   const std::string& targets_dirs) {
  redis::Store store(client);
  KILN_ASSIGN_OR_RETURN(auto statuses, store.target_statuses());
  std::vector<std::string> units;
  std::map<std::string, std::map<std::string, std::string>> by_unit;
  for (auto& [unit, fields] : statuses) {
    if (unit == sel.target || unit.rfind(sel.target + "@", 0) == 0) {
      units.push_back(unit);
      by_unit[unit] = fields;
    }
  }
  KILN_ASSIGN_OR_RETURN(std::string unit, pick_unit(units, sel, "the run's Redis"));
  const auto& f = by_unit[unit];
  auto get = [&](const char* k) {
    auto it = f.find(k);
    return it == f.end() ? std::string() : it->second;
  };
  ExportCandidate c;
  c.gpu_model = get("gpu_model");
  KILN_ASSIGN_OR_RETURN(auto run, store.get_run());
  c.backend = run.count("backend") ? run.at("backend") : "";
  KILN_ASSIGN_OR_RETURN(
      c.target, load_checked(targets_dirs, sel.target, get("spec_hash"), "the run's Redis"));
  std::string id = sel.candidate_id.empty() ? get("best_id") : sel.candidate_id;
  if (id.empty()) return not_found("'" + unit + "' has no verified kernel yet in the run's Redis");
  KILN_ASSIGN_OR_RETURN(std::optional<redis::CandidateRecord> rec, store.get_candidate(id));
  if (!rec) return not_found("no candidate " + id + " in the run's Redis (give the whole id)");
  KILN_ASSIGN_OR_RETURN(std::optional<std::string> source, store.get_source(rec->source_hash));
  if (!source) return data_loss("the run's Redis has no text for candidate " + id);
  c.source = *source;
  c.candidate_id = id;
  nlohmann::json params =
      nlohmann::json::parse(rec->params.empty() ? "{}" : rec->params, nullptr, false);
  KILN_ASSIGN_OR_RETURN(c.params, params_from_json(params, "kiln:cand:" + id));
  KILN_ASSIGN_OR_RETURN(auto results, store.find_results(id));
  for (const auto& [arch, bytes] : results) {
    Result<proto::Envelope> env = proto::decode(bytes);
    if (!env.is_ok()) continue;
    const auto* r = std::get_if<proto::EvaluationResult>(&env->body);
    if (r && r->outcome == proto::Outcome::kVerified) {
      c.search_result = eval::result_to_json(*r);
      c.arch = r->arch;
    }
  }
  if (c.search_result.is_null())
    return not_found("candidate " + id + " has no verified result in the run's Redis");
  c.origin = "redis " + unit;
  KILN_RETURN_IF_ERROR(complete(c, ""));
  return c;
}

}  // namespace kiln::exporter
