// Engine: see engine.h.
#include "coordinator/engine.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <deque>

#include <nlohmann/json.hpp>

#include "evaluator/evaluation.h"
#include "shared/hash.h"
#include "shared/redis_keys.h"

namespace kiln::coordinator {
namespace {

using Clock = std::chrono::steady_clock;
using Params = std::map<std::string, std::string>;
using Fields = std::vector<std::pair<std::string, std::string>>;
using Entry = std::map<std::string, std::string>;  // one step of the search log, by field

std::string label_of(const Params& params, const KernelSpec& tmpl) {
  std::string s;
  for (const auto& [k, v] : params) {
    if (!tmpl.space.count(k)) continue;
    s += (s.empty() ? "" : ",") + k + "=" + v;
  }
  return s.empty() ? "seed" : "template " + s;
}

// Doubles in Redis fields keep every digit: a replay judges with exactly the original numbers.
std::string num(double v) {
  char b[40];
  std::snprintf(b, sizeof(b), "%.17g", v);
  return b;
}

std::string field(const Entry& e, const char* name) {
  auto it = e.find(name);
  return it == e.end() ? std::string() : it->second;
}

Result<double> number_field(const Entry& e, const char* name) {
  const std::string text = field(e, name);
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || errno == ERANGE) {
    return data_loss(std::string("field ") + name + " '" + text + "' is not a number");
  }
  return v;
}

Result<uint64_t> integer_field(const Entry& e, const char* name) {
  const std::string text = field(e, name);
  uint64_t v = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || ptr != text.data() + text.size()) {
    return data_loss(std::string("field ") + name + " '" + text + "' is not a non-negative integer");
  }
  return v;
}

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
std::string join_models(const std::vector<std::string>& models) { return nlohmann::json(models).dump(); }

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

Fields record_fields(const RunRecord& r) {
  Fields f = {{"id", r.id},
              {"targets", join(r.targets)},
              {"backend", r.backend},
              {"gpu_models", join_models(r.gpu_models)},
              {"toolchain", r.toolchain},
              {"seed", std::to_string(r.seed)},
              {"islands", std::to_string(r.islands)},
              {"capacity", std::to_string(r.capacity)},
              {"patience", std::to_string(r.patience)},
              {"budget_s", std::to_string(r.budget_s)},
              {"spent_s", num(r.spent_s)},
              {"state", r.state},
              {"starts", std::to_string(r.starts)}};
  for (const auto& [t, h] : r.spec_hashes) f.emplace_back("spec." + t, h);
  return f;
}

int64_t epoch_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

Result<std::optional<RunRecord>> read_run_record(redis::Store& store) {
  KILN_ASSIGN_OR_RETURN(Entry f, store.get_run());
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
  return std::optional<RunRecord>(std::move(r));
}

std::string unit_key(const std::string& target, const std::string& gpu_model) {
  if (gpu_model.empty()) return target;
  return target + "@" + redis::keys::safe_key_component(gpu_model);
}

struct Engine::TargetState {
  TargetSpec spec;
  std::string gpu_model;  // "" for any evaluator of the backend
  std::string key;        // unit_key(spec.name, gpu_model)
  const BackendSpec* backend = nullptr;
  Shape bench;
  DType dtype = DType::kF32;
  Population population;
  std::unique_ptr<agent::BuiltinProposer> proposer;
  SeenSet seen;
  TargetReport report;
  std::map<std::string, double> fraction_of_floor;  // by candidate id
  std::map<std::string, std::string> sources;       // by candidate id (seed and template)
  bool seed_verified = false;
  bool exhausted = false;
  bool done = false;
  uint32_t in_flight = 0;
  uint32_t asking = 0;  // propose tasks at agents (counted in in_flight too)
  // Agents' children that failed, handed back in the next propose task for repair (bounded), and
  // one-line notes on recent failures of any child for the prompts.
  std::deque<proto::FailedChild> failed_for_agents;
  std::deque<std::string> failure_notes;
  std::map<std::string, std::map<std::string, double>> metrics;  // by candidate id (profiles)
  std::map<std::string, std::string> bottleneck;  // by candidate id: its profile's class
  uint32_t slots = 1;  // evaluations it may have queued or running (allocate_slots below)
  uint32_t next_island = 0;
  std::vector<std::string> submitted;  // candidate ids sent for evaluation, in order
  std::string seed_id;                 // the baseline's candidate id, once verified

  // The physical floor at the benchmark shape, from the best's measured fraction of it; 0 when
  // unknown (the cpu backend measures none).
  double floor_us() const {
    return report.fraction_of_floor > 0 ? report.best_us * report.fraction_of_floor : 0;
  }

  TargetState(TargetSpec s, std::string model, const std::string& backend_name, const SearchParams& params)
      : spec(std::move(s)),
        gpu_model(std::move(model)),
        key(unit_key(spec.name, gpu_model)),
        population(spec.name, gpu_model.empty() ? backend_name : key.substr(spec.name.size() + 1), params) {}
};

Engine::Engine(std::vector<TargetSpec> targets, Dispatcher& dispatcher, EngineOptions options,
               redis::Store* store)
    : dispatcher_(&dispatcher),
      options_(std::move(options)),
      specs_(std::move(targets)),
      rng_(options_.seed),
      store_(store) {
  // Enumerating a template's space evaluates its constraints for every combination (reduce's has
  // 10,800): done once here, before any worker connects, never inside the loop that must keep
  // heartbeating (a loop stalled for seconds makes evaluators give up on the coordinator).
  for (const TargetSpec& spec : specs_) {
    std::vector<Params>& configs = configs_[spec.name];
    const BackendSpec* b = spec.backend(options_.backend);
    if (b && b->tunable) {
      const Shape bench = spec.benchmark_for(options_.backend);
      eval::for_each_config(*b->tunable, bench, b->dtypes.front(), [&](const Params& p) {
        configs.push_back(p);
        return true;
      });
    }
  }
  for (const std::string& model : options_.gpu_models) add_gpu_model(model);
}

bool Engine::add_gpu_model(const std::string& model) {
  if (std::find(record_models_.begin(), record_models_.end(), model) != record_models_.end()) return false;
  record_models_.push_back(model);
  for (const TargetSpec& spec : specs_) {
    auto st = std::make_unique<TargetState>(spec, model, options_.backend, options_.search);
    st->backend = st->spec.backend(options_.backend);
    st->bench = st->spec.benchmark_for(options_.backend);
    st->dtype = st->backend ? st->backend->dtypes.front() : DType::kF32;
    st->report.target = st->spec.name;
    st->report.gpu_model = model;
    if (!st->backend) {
      st->report.state = "failed: no kernels for the " + options_.backend + " backend";
      st->done = true;
    } else if (st->backend->tunable) {
      st->proposer = std::make_unique<agent::BuiltinProposer>(*st->backend->tunable, st->bench, st->dtype);
    }
    targets_.push_back(std::move(st));
  }
  return true;
}

std::string Engine::id_backend(const TargetState& st) const {
  return st.gpu_model.empty() ? options_.backend : options_.backend + "@" + st.gpu_model;
}

Engine::~Engine() = default;

const char* Engine::kind_name(Pending::Kind kind) {
  switch (kind) {
    case Pending::Kind::kSeed: return "seed";
    case Pending::Kind::kChild: return "child";
    case Pending::Kind::kRetime: return "retime";
  }
  return "?";
}

std::optional<Engine::Pending::Kind> Engine::kind_from(std::string_view name) {
  if (name == "seed") return Pending::Kind::kSeed;
  if (name == "child") return Pending::Kind::kChild;
  if (name == "retime") return Pending::Kind::kRetime;
  return std::nullopt;
}

std::optional<size_t> Engine::target_index(std::string_view name, std::string_view gpu_model) const {
  for (size_t t = 0; t < targets_.size(); ++t) {
    if (targets_[t]->spec.name == name && targets_[t]->gpu_model == gpu_model) return t;
  }
  return std::nullopt;
}

bool Engine::finished() const {
  // A run that discovers its GPU models is not over before an evaluator brought one.
  if (targets_.empty()) return !options_.discover_gpu_models && specs_.empty();
  return std::all_of(targets_.begin(), targets_.end(), [](const auto& t) { return t->done; });
}

const Population* Engine::population(std::string_view target, std::string_view gpu_model) const {
  std::optional<size_t> t = target_index(target, gpu_model);
  return t ? &targets_[*t]->population : nullptr;
}

std::vector<std::string> Engine::submitted(std::string_view target, std::string_view gpu_model) const {
  std::optional<size_t> t = target_index(target, gpu_model);
  return t ? targets_[*t]->submitted : std::vector<std::string>();
}

double Engine::spent_s() const {
  if (!running_) return spent_before_;
  return spent_before_ + std::chrono::duration<double>(Clock::now() - start_).count();
}

Status Engine::write(redis::SearchStep step) {
  if (!store_ || replaying_) return Status::ok();
  return store_->write_step(record_.id, step);
}

std::vector<std::pair<redis::PopulationKey, std::vector<std::pair<std::string, double>>>>
Engine::population_members(size_t t) const {
  const TargetState& st = *targets_[t];
  std::vector<std::pair<redis::PopulationKey, std::vector<std::pair<std::string, double>>>> out;
  for (size_t i = 0; i < st.population.islands().size(); ++i) {
    std::vector<std::pair<std::string, double>> members;
    for (const Individual& e : st.population.island(i).elites()) members.emplace_back(e.id, e.median_us);
    out.push_back({{st.spec.name, st.population.arch(), std::to_string(i)}, std::move(members)});
  }
  return out;
}

Status Engine::begin() {
  if (!store_) return failed_precondition("the engine has no store to record the run in");
  KILN_ASSIGN_OR_RETURN(std::optional<RunRecord> existing, read_run_record(*store_));
  if (existing) {
    return Status(StatusCode::kAlreadyExists, "Redis already holds run " + existing->id + " (" + join(existing->targets) +
                          " on " + existing->backend + ", " + existing->state +
                          "): resume it, or start a new run on an empty database");
  }
  record_ = RunRecord{};
  record_.id = "run-" + std::to_string(epoch_ms());
  for (const TargetSpec& spec : specs_) {
    record_.targets.push_back(spec.name);
    record_.spec_hashes[spec.name] = spec.spec_hash;
  }
  record_.backend = options_.backend;
  record_.gpu_models = record_models_;
  record_.toolchain = options_.toolchain;
  record_.seed = options_.seed;
  record_.islands = options_.search.islands;
  record_.capacity = options_.search.capacity;
  record_.patience = options_.limits.max_proposals_without_gain;
  record_.budget_s = options_.budget.count();
  record_.state = "running";
  record_.starts = 1;
  KILN_RETURN_IF_ERROR(store_->put_run(record_fields(record_)));
  begun_ = true;
  return Status::ok();
}

Status Engine::check_record(const RunRecord& recorded) const {
  std::set<std::string> theirs(recorded.targets.begin(), recorded.targets.end()), ours;
  for (const TargetSpec& spec : specs_) ours.insert(spec.name);
  if (theirs != ours) {
    std::vector<std::string> missing, added;
    for (const auto& t : theirs) if (!ours.count(t)) missing.push_back(t);
    for (const auto& t : ours) if (!theirs.count(t)) added.push_back(t);
    std::string why = "run " + recorded.id + " searches targets " + join(recorded.targets) +
                      ", this one names ";
    for (const TargetSpec& spec : specs_) why += (&spec == &specs_.front() ? "" : ",") + spec.name;
    if (!missing.empty()) why += " (missing: " + join(missing) + ")";
    if (!added.empty()) why += " (not in the run: " + join(added) + ")";
    return failed_precondition(why);
  }
  if (recorded.backend != options_.backend) {
    return failed_precondition("run " + recorded.id + " searches on the " + recorded.backend +
                               " backend, this one on " + options_.backend);
  }
  if (recorded.toolchain != options_.toolchain) {
    return failed_precondition("run " + recorded.id + " was made by '" + recorded.toolchain +
                               "', this is '" + options_.toolchain +
                               "' (candidate ids would not match; resume it with that kiln)");
  }
  if (recorded.islands != options_.search.islands || recorded.capacity != options_.search.capacity) {
    return failed_precondition("run " + recorded.id + " has " + std::to_string(recorded.islands) +
                               " island(s) of " + std::to_string(recorded.capacity) + ", this one " +
                               std::to_string(options_.search.islands) + " of " +
                               std::to_string(options_.search.capacity));
  }
  for (const TargetSpec& spec : specs_) {
    auto it = recorded.spec_hashes.find(spec.name);
    const std::string theirs_hash = it == recorded.spec_hashes.end() ? "(none)" : it->second;
    if (theirs_hash != spec.spec_hash) {
      return failed_precondition("target " + spec.name + " changed since run " + recorded.id +
                                 " started (spec hash " + theirs_hash.substr(0, 12) + " -> " +
                                 spec.spec_hash.substr(0, 12) +
                                 "): its candidate ids would not match; start a new run");
    }
  }
  if (!options_.discover_gpu_models) {
    std::set<std::string> their_models(recorded.gpu_models.begin(), recorded.gpu_models.end());
    std::set<std::string> our_models(options_.gpu_models.begin(), options_.gpu_models.end());
    auto names = [](const std::set<std::string>& m) {
      std::string s;
      for (const auto& x : m) s += (s.empty() ? "" : ", ") + (x.empty() ? std::string("any GPU") : x);
      return s;
    };
    if (their_models != our_models) {
      return failed_precondition("run " + recorded.id + " searched on " + names(their_models) +
                                 ", this one on " + names(our_models) +
                                 " (populations are per GPU model: resume it where those GPUs are)");
    }
  }
  return Status::ok();
}

Result<std::string> Engine::source_of(const std::string& hash) {
  if (auto it = sources_.find(hash); it != sources_.end()) return it->second;
  KILN_ASSIGN_OR_RETURN(std::optional<std::string> text, store_->get_source(hash));
  if (!text) return data_loss("source " + hash + " is not in Redis");
  sources_[hash] = *text;
  return *text;
}

void Engine::track(Pending p) {
  TargetState& st = *targets_[p.target];
  ++st.in_flight;
  if (p.kind != Pending::Kind::kRetime) st.submitted.push_back(p.task.candidate_id);
  const std::string task_id = p.task.task_id;
  pending_[task_id] = std::move(p);
}

Status Engine::submit(size_t t, Pending p, const std::string& source, const Params& params,
                      const std::string& id) {
  TargetState& st = *targets_[t];
  const uint64_t seq = ++task_seq_;
  proto::EvaluateTask& task = p.task;
  task.task_id = "t" + std::to_string(seq) + "-" + id.substr(0, 16);
  task.candidate_id = id;
  task.target = st.spec.name;
  task.backend = options_.backend;
  task.gpu_model = st.gpu_model;
  task.spec_hash = st.spec.spec_hash;
  // Template configurations (and children of them) carry the template's parameters; the seed and
  // its rewrites carry none. The evaluator takes the kernel's geometry from the kind it is told.
  task.kind = std::string(params.empty() ? proto::kKindSeed : proto::kKindTemplate);
  task.source = source;
  task.params = params;
  task.dtypes = {std::string(dtype_name(st.dtype))};
  // A new best is profiled at its re-time: its bottleneck class guides the children it gets.
  task.profile = p.kind == Pending::Kind::kRetime && options_.profile_new_bests;
  p.target = t;
  p.source = source;
  if (store_) {
    // Logged before it is sent: a coordinator that dies in between finds it on resume.
    const std::string hash = sha256_hex(source);
    const std::string params_json = nlohmann::json(params).dump();
    const Individual& subject = p.kind == Pending::Kind::kRetime ? p.parent : p.child;
    redis::SearchStep step;
    step.event = {{"type", "submit"}, {"seq", std::to_string(seq)}, {"target", st.spec.name},
                  {"task", task.task_id}, {"cand", id}, {"kind", kind_name(p.kind)},
                  {"params", params_json}, {"source", hash}};
    if (!st.gpu_model.empty()) step.event.emplace_back("gpu", st.gpu_model);
    if (p.kind != Pending::Kind::kSeed) {
      step.event.insert(step.event.end(), {{"island", std::to_string(subject.island)},
                                           {"parent", subject.parent_id}, {"op", subject.op},
                                           {"generation", std::to_string(subject.generation)}});
    }
    if (p.kind == Pending::Kind::kChild) {
      step.event.insert(step.event.end(), {{"parent_us", num(p.parent.median_us)},
                                           {"parent_noise", num(p.parent.noise_rel)}});
    } else if (p.kind == Pending::Kind::kRetime) {
      step.event.insert(step.event.end(), {{"median_us", num(p.parent.median_us)},
                                           {"noise_rel", num(p.parent.noise_rel)}});
    }
    if (sources_written_.insert(hash).second) step.sources.push_back(source);
    step.candidate = id;
    if (p.kind == Pending::Kind::kRetime) {
      step.candidate_fields = {{"status", "re-timing"}, {"retime_task", task.task_id}};
    } else {
      step.candidate_fields = {{"target", st.key}, {"kind", kind_name(p.kind)},
                               {"task", task.task_id}, {"source_hash", hash},
                               {"params", params_json}, {"parent", subject.parent_id},
                               {"operator", p.kind == Pending::Kind::kSeed ? "seed" : subject.op},
                               {"generation", std::to_string(subject.generation)},
                               {"island", std::to_string(subject.island)}, {"status", "submitted"}};
    }
    Status written = write(std::move(step));
    if (!written.is_ok()) {
      sources_written_.erase(hash);
      return written.with_context("recording task " + task.task_id + " in Redis");
    }
  }
  dispatcher_->submit(task);
  track(std::move(p));
  return Status::ok();
}

Status Engine::top_up(size_t t) {
  TargetState& st = *targets_[t];
  if (st.done) return Status::ok();
  if (st.report.state == "starting") {
    const KernelSpec& seed = st.backend->seed;
    const std::string id = candidate_id(st.spec.spec_hash, id_backend(st), seed.source, seed.defines,
                                        options_.toolchain);
    st.seen.insert(id);
    st.sources[id] = seed.source;
    Pending p;
    p.kind = Pending::Kind::kSeed;
    p.child.id = id;
    p.child.params = seed.defines;
    p.child.op = "seed";
    KILN_RETURN_IF_ERROR(submit(t, std::move(p), seed.source, seed.defines, id));
    st.report.state = "evaluating the seed";
    return Status::ok();
  }
  if (!st.seed_verified || !st.proposer || st.exhausted) return Status::ok();
  const KernelSpec& tmpl = *st.backend->tunable;
  const size_t islands = st.population.islands().size();
  while (st.in_flight < st.slots) {
    const size_t island = st.next_island++ % islands;
    const Individual* parent = st.population.select_parent(island, rng_);
    if (!parent) break;
    auto id_of = [&](const Params& p) {
      return candidate_id(st.spec.spec_hash, id_backend(st), tmpl.source, p, options_.toolchain);
    };
    auto seen = [&](const Params& p) { return st.seen.contains(id_of(p)); };
    Params child;
    std::string op;
    if (parent->op == "seed") {
      // The seed is another kernel: its children are template configurations, the first in the
      // space's order, then random ones.
      std::vector<Params> fresh;
      for (const Params& p : configs_.at(st.spec.name)) {
        if (!seen(p)) fresh.push_back(p);
        if (fresh.size() >= 64) break;
      }
      if (!fresh.empty()) {
        child = st.seen.size() == 1 ? fresh.front() : fresh[rng_() % fresh.size()];
        op = "template";
      }
    } else {
      const Individual* second = nullptr;
      const auto& elites = st.population.island(island).elites();
      if (elites.size() > 1 && rng_() % 4 == 0) second = &elites[rng_() % elites.size()];
      if (second && (second->id == parent->id || second->op == "seed")) second = nullptr;
      if (!replaying_ && st.asking < options_.agent_asks_per_target && dispatcher_->agents() > 0) {
        ask_agent(t, *parent, second, static_cast<uint32_t>(island));
        continue;
      }
      const auto bn = st.bottleneck.find(parent->id);
      const std::string guide = options_.profile_guidance && bn != st.bottleneck.end() ? bn->second : "";
      agent::Proposal p = st.proposer->propose_guided(parent->params, second ? &second->params : nullptr,
                                                      guide, seen, rng_);
      child = p.params;
      // The operator as recorded with the child (kiln:cand:{id} "operator"): with the class that
      // steered it when the parent's profile did.
      op = p.operator_name;
      if (!guide.empty() && p.description.find("guided by") != std::string::npos) op += " guided by " + guide;
      if (child.empty()) spdlog::info("{}: {}", st.spec.name, p.reason);
    }
    if (child.empty()) {
      st.exhausted = true;
      break;
    }
    const std::string id = id_of(child);
    st.seen.insert(id);
    Status counted = st.population.record_proposal(island, parent->id);
    (void)counted;  // a parent dropped since still counts towards convergence
    Pending p;
    p.kind = Pending::Kind::kChild;
    p.parent = *parent;
    p.child.id = id;
    p.child.params = child;
    p.child.parent_id = parent->id;
    p.child.op = op;
    p.child.generation = parent->generation + 1;
    p.child.island = static_cast<uint32_t>(island);
    KILN_RETURN_IF_ERROR(submit(t, std::move(p), tmpl.source, child, id));
  }
  return Status::ok();
}

void Engine::ask_agent(size_t t, const Individual& parent, const Individual* second, uint32_t island) {
  TargetState& st = *targets_[t];
  const KernelSpec& tmpl = *st.backend->tunable;
  proto::ProposeTask task;
  task.task_id = "p" + std::to_string(++ask_seq_) + "-" + st.spec.name;
  task.target = st.spec.name;
  task.arch = st.population.arch();
  task.backend = options_.backend;
  for (const Individual* ind : {&parent, second}) {
    if (!ind) continue;
    proto::ParentInfo info;
    info.candidate_id = ind->id;
    auto src = st.sources.find(ind->id);  // an agent's child has a source of its own
    info.source = src != st.sources.end() ? src->second : tmpl.source;
    info.params = ind->params;
    info.time_us = ind->median_us;
    if (auto b = st.bottleneck.find(ind->id); b != st.bottleneck.end()) info.bottleneck = b->second;
    if (auto m = st.metrics.find(ind->id); m != st.metrics.end()) info.metrics = m->second;
    task.parents.push_back(std::move(info));
  }
  task.count = 1;
  task.operator_hint = st.proposer ? st.proposer->tier_name(st.proposer->current_tier()) : "";
  task.failure_logs.assign(st.failure_notes.begin(), st.failure_notes.end());
  task.failed_children.assign(st.failed_for_agents.begin(), st.failed_for_agents.end());
  if (!dispatcher_->submit_proposal(task)) return;
  st.failed_for_agents.clear();  // handed over once
  asked_[task.task_id] = {t, parent, island};
  ++st.asking;
  ++st.in_flight;
  ++agent_stats_.asked;
}

Status Engine::on_proposal(const proto::Proposal& proposal) {
  auto it = asked_.find(proposal.task_id);
  if (it == asked_.end()) return Status::ok();
  Asked asked = std::move(it->second);
  asked_.erase(it);
  TargetState& st = *targets_[asked.target];
  --st.asking;
  --st.in_flight;
  if (!proposal.error.empty() || proposal.candidates.empty()) {
    ++agent_stats_.failed;
    spdlog::info("{}: agent proposal {}: {}", st.spec.name, proposal.task_id,
                 proposal.error.empty() ? "no candidates" : proposal.error);
    return Status::ok();
  }
  ++agent_stats_.answered;
  if (st.done) return Status::ok();
  const KernelSpec& tmpl = *st.backend->tunable;
  for (const proto::ProposedCandidate& c : proposal.candidates) {
    // A candidate keeps the template's contract: every template parameter set and nothing else
    // (the evaluator then uses the template's entry point and launch geometry) and the constraints
    // hold. Its source is the template's (built-in agents) or its own (LLM agents).
    bool in_space = c.params.size() == tmpl.space.size() && c.source.size() <= (256u << 10) && !c.source.empty();
    for (const auto& [name, values] : tmpl.space) in_space = in_space && c.params.count(name) > 0;
    Result<bool> valid = in_space ? eval::satisfies_constraints(tmpl, st.bench, st.dtype, c.params) : Result<bool>(false);
    if (!valid.is_ok() || !*valid) {
      ++agent_stats_.rejected;
      spdlog::info("{}: agent candidate rejected: not a valid configuration of the template", st.spec.name);
      continue;
    }
    const std::string id = candidate_id(st.spec.spec_hash, id_backend(st), c.source, c.params,
                                        options_.toolchain);
    if (st.seen.contains(id)) {
      ++agent_stats_.duplicates;
      continue;
    }
    st.seen.insert(id);
    if (c.source != tmpl.source) st.sources[id] = c.source;
    Status counted = st.population.record_proposal(asked.island, asked.parent.id);
    (void)counted;  // a parent dropped since still counts towards convergence
    Pending p;
    p.kind = Pending::Kind::kChild;
    p.parent = asked.parent;
    p.child.id = id;
    p.child.params = c.params;
    p.child.parent_id = asked.parent.id;
    p.child.op = "agent " + (c.operator_name.empty() ? std::string("proposal") : c.operator_name);
    p.child.generation = asked.parent.generation + 1;
    p.child.island = asked.island;
    ++agent_stats_.children;
    KILN_RETURN_IF_ERROR(submit(asked.target, std::move(p), c.source, c.params, id));
  }
  return Status::ok();
}

Status Engine::on_result(const proto::EvaluationResult& r) {
  auto it = pending_.find(r.task_id);
  if (it == pending_.end()) return Status::ok();
  Pending p = std::move(it->second);
  pending_.erase(it);
  TargetState& st = *targets_[p.target];
  --st.in_flight;
  ++st.report.evaluations;
  const bool ok = r.outcome == proto::Outcome::kVerified && r.timing.median_us > 0;
  if (!ok) ++st.report.failures;
  if (auto f = r.metrics.find("fraction_of_floor"); f != r.metrics.end()) {
    st.fraction_of_floor[r.candidate_id] = f->second;
  }
  if (!r.bottleneck.empty()) {
    st.bottleneck[r.candidate_id] = r.bottleneck;
    st.metrics[r.candidate_id] = r.metrics;  // with the prof.* counters behind the class
  }
  auto crown = [&](const Individual& best) {
    st.report.best_us = best.median_us;
    st.report.best_id = best.id;
    st.report.best_params = best.params;
    st.report.best_source = p.source;
    st.report.best_label = best.op == "seed" ? "seed" : label_of(best.params, *st.backend->tunable);
    st.report.fraction_of_floor = st.fraction_of_floor.count(best.id) ? st.fraction_of_floor[best.id] : 0;
  };
  // The judged result as one step of the search log, with the keys it changes.
  auto logged = [&](const std::string& decision, const std::string& reason, bool islands_changed) {
    if (!store_ || replaying_) return Status::ok();
    redis::SearchStep step;
    step.event = {{"type", "result"}, {"target", st.spec.name}, {"task", r.task_id},
                  {"cand", r.candidate_id}, {"kind", kind_name(p.kind)},
                  {"outcome", proto::outcome_name(r.outcome)}, {"median_us", num(r.timing.median_us)},
                  {"noise_rel", num(r.timing.noise_rel)}, {"arch", r.arch}, {"decision", decision},
                  {"reason", reason},
                  {"result", proto::encode({proto::kProtocolVersion, r.task_id, r})}};
    if (!st.gpu_model.empty()) step.event.emplace_back("gpu", st.gpu_model);
    step.candidate = r.candidate_id;
    step.candidate_fields = {{"status", decision}, {"median_us", num(r.timing.median_us)},
                             {"arch", r.arch}};
    if (!r.bottleneck.empty()) step.candidate_fields.emplace_back("bottleneck", r.bottleneck);
    step.target = st.key;
    step.target_fields = {{"spec_hash", st.spec.spec_hash}, {"best_id", st.report.best_id},
                          {"best_us", num(st.report.best_us)}};
    if (st.seed_verified) {
      step.target_fields.insert(step.target_fields.end(),
                                {{"baseline_id", st.seed_id}, {"baseline_us", num(st.report.seed_us)}});
    }
    if (islands_changed) step.populations = population_members(p.target);
    return write(std::move(step)).with_context("recording the result of task " + r.task_id + " in Redis");
  };
  switch (p.kind) {
    case Pending::Kind::kSeed: {
      if (!ok) {
        st.report.state = "failed: the seed did not verify (" + proto::outcome_name(r.outcome) + "): " +
                          r.log.substr(0, 200);
        st.done = true;
        return logged("failed", st.report.state, false);
      }
      Individual seed;
      seed.id = r.candidate_id;
      seed.params = st.backend->seed.defines;
      seed.median_us = r.timing.median_us;
      seed.noise_rel = r.timing.noise_rel;
      seed.op = "seed";
      st.population.add_seed(seed);
      st.seed_verified = true;
      st.seed_id = seed.id;
      st.report.seed_us = seed.median_us;
      crown(seed);
      st.report.state = st.proposer ? "searching" : "converged: no template to search";
      st.done = !st.proposer;
      return logged("baseline", "the seed's time is the baseline", true);
    }
    case Pending::Kind::kChild: {
      if (st.proposer) st.proposer->report(p.child.params, false);
      if (!r.metrics.empty()) st.metrics[p.child.id] = r.metrics;
      if (!ok) {
        std::string detail = r.log;
        for (const proto::StageReport& s : r.stages) {
          if (!s.passed) detail += (detail.empty() ? "" : "\n") + s.name + ": " + s.detail;
        }
        if (detail.size() > 8000) detail = detail.substr(0, 4000) + "\n...\n" + detail.substr(detail.size() - 4000);
        st.failure_notes.push_back(p.child.op + ": " + proto::outcome_name(r.outcome) + ": " +
                                   detail.substr(0, detail.find('\n')).substr(0, 200));
        while (st.failure_notes.size() > 4) st.failure_notes.pop_front();
        if (p.child.op.rfind("agent llm", 0) == 0) {  // LLM children go back for repair
          st.failed_for_agents.push_back({p.child.id, p.child.parent_id, p.source, p.child.params,
                                          proto::outcome_name(r.outcome), detail});
          while (st.failed_for_agents.size() > 4) st.failed_for_agents.pop_front();
        }
        return logged("failed", proto::outcome_name(r.outcome), false);
      }
      p.child.median_us = r.timing.median_us;
      p.child.noise_rel = r.timing.noise_rel;
      Result<Decision> d = st.population.offer_child(p.parent, p.child);
      if (!d.is_ok()) {
        spdlog::warn("{}: {}", st.spec.name, d.status().to_string());
        return logged("reverted", d.status().message(), false);
      }
      if (d->keep) {
        ++st.report.accepted;
        if (st.proposer) st.proposer->report(p.child.params, true);
      }
      spdlog::debug("{}: {} {} -> {}", st.spec.name, p.child.op, p.child.id.substr(0, 12), d->reason);
      // The judged step first, then the re-time's own submit step: a resume that finds a kept
      // child pending re-time without the second sends the re-time again.
      KILN_RETURN_IF_ERROR(logged(d->keep ? "kept" : "reverted", d->reason, d->keep));
      if (d->needs_retime && !replaying_) {
        Pending q;
        q.kind = Pending::Kind::kRetime;
        q.parent = p.child;
        KILN_RETURN_IF_ERROR(submit(p.target, std::move(q), p.source, p.child.params, p.child.id));
      }
      return Status::ok();
    }
    case Pending::Kind::kRetime: {
      // On failure the pending crown stays pending until a later one replaces it.
      if (!ok) return logged("failed", proto::outcome_name(r.outcome), false);
      CrownStep c = st.population.confirm_crown(p.parent.id, r.timing.median_us, r.timing.noise_rel);
      const bool crowned = c.state == CrownState::kCrowned && st.population.crowned();
      if (crowned) crown(*st.population.crowned());
      if (!replaying_) spdlog::info("{}: re-timed {}: {}", st.spec.name, p.parent.id.substr(0, 12), c.reason);
      return logged(crowned ? "crowned" : "crown rejected", c.reason, false);
    }
  }
  return Status::ok();
}

Status Engine::mark_done(size_t t, const std::string& state) {
  TargetState& st = *targets_[t];
  st.report.state = state;
  st.done = true;
  redis::SearchStep step;
  step.event = {{"type", "done"}, {"target", st.spec.name}, {"state", state}};
  if (!st.gpu_model.empty()) step.event.emplace_back("gpu", st.gpu_model);
  step.target = st.key;
  step.target_fields = {{"state", state}};
  return write(std::move(step)).with_context("recording that " + st.key + " is done in Redis");
}

Status Engine::replay_submit(const Entry& e) {
  // A model whose populations this process has not made yet (a coordinator that discovers its
  // models) gets them now, as it did when the first evaluator of that model connected.
  const std::string model = field(e, "gpu");
  if (options_.discover_gpu_models) add_gpu_model(model);
  std::optional<size_t> t = target_index(field(e, "target"), model);
  if (!t) return data_loss("unknown target '" + unit_key(field(e, "target"), model) + "'");
  TargetState& st = *targets_[*t];
  std::optional<Pending::Kind> kind = kind_from(field(e, "kind"));
  if (!kind) return data_loss("unknown kind '" + field(e, "kind") + "'");
  KILN_ASSIGN_OR_RETURN(uint64_t seq, integer_field(e, "seq"));
  task_seq_ = std::max(task_seq_, seq);
  const std::string id = field(e, "cand");
  nlohmann::json pj = nlohmann::json::parse(field(e, "params"), nullptr, false);
  if (pj.is_discarded() || !pj.is_object()) return data_loss("params of " + id + " are not a JSON object");
  Params params;
  for (const auto& [k, v] : pj.items()) {
    if (!v.is_string()) return data_loss("params of " + id + ": " + k + " is not a string");
    params[k] = v.get<std::string>();
  }
  KILN_ASSIGN_OR_RETURN(std::string source, source_of(field(e, "source")));
  Pending p;
  p.target = *t;
  p.kind = *kind;
  p.source = source;
  p.task.task_id = field(e, "task");
  p.task.candidate_id = id;
  p.task.target = st.spec.name;
  p.task.backend = options_.backend;
  p.task.gpu_model = st.gpu_model;
  p.task.spec_hash = st.spec.spec_hash;
  p.task.kind = std::string(params.empty() ? proto::kKindSeed : proto::kKindTemplate);
  p.task.source = source;
  p.task.params = params;
  p.task.dtypes = {std::string(dtype_name(st.dtype))};
  Individual subject;
  subject.id = id;
  subject.params = params;
  if (*kind != Pending::Kind::kSeed) {
    KILN_ASSIGN_OR_RETURN(uint64_t island, integer_field(e, "island"));
    KILN_ASSIGN_OR_RETURN(uint64_t generation, integer_field(e, "generation"));
    subject.island = static_cast<uint32_t>(island);
    subject.generation = static_cast<uint32_t>(generation);
    subject.parent_id = field(e, "parent");
    subject.op = field(e, "op");
  }
  switch (*kind) {
    case Pending::Kind::kSeed:
      st.seen.insert(id);
      st.sources[id] = source;
      st.report.state = "evaluating the seed";
      subject.op = "seed";
      p.child = subject;
      break;
    case Pending::Kind::kChild: {
      // The same changes top_up() / on_proposal() made when this child was proposed.
      st.seen.insert(id);
      if (st.backend && st.backend->tunable && source != st.backend->tunable->source) st.sources[id] = source;
      // The note the proposer made when it proposed this child: the tier progression replays too.
      if (st.proposer) st.proposer->replay_proposal(params, subject.op);
      (void)st.population.record_proposal(subject.island, subject.parent_id);
      const Individual* parent = subject.island < st.population.islands().size()
                                     ? st.population.island(subject.island).find(subject.parent_id)
                                     : nullptr;
      if (parent) {
        p.parent = *parent;
      } else {  // not expected: top_up() drew the parent from that island
        p.parent.id = subject.parent_id;
        KILN_ASSIGN_OR_RETURN(p.parent.median_us, number_field(e, "parent_us"));
        KILN_ASSIGN_OR_RETURN(p.parent.noise_rel, number_field(e, "parent_noise"));
      }
      p.child = subject;
      break;
    }
    case Pending::Kind::kRetime:
      KILN_ASSIGN_OR_RETURN(subject.median_us, number_field(e, "median_us"));
      KILN_ASSIGN_OR_RETURN(subject.noise_rel, number_field(e, "noise_rel"));
      p.parent = subject;
      retimes_logged_.insert(id);
      break;
  }
  track(std::move(p));
  return Status::ok();
}

Status Engine::replay_result(const Entry& e) {
  Result<proto::Envelope> env = proto::decode(field(e, "result"));
  if (!env.is_ok()) return data_loss("result of task " + field(e, "task") + ": " + env.status().message());
  auto* r = std::get_if<proto::EvaluationResult>(&env->body);
  if (!r) return data_loss("result of task " + field(e, "task") + " holds no result");
  if (!pending_.count(r->task_id)) {
    spdlog::warn("resume: a logged result for task {} that was never logged as submitted; ignored", r->task_id);
    return Status::ok();
  }
  results_.push_back(*r);
  return on_result(*r);
}

Status Engine::resume() {
  if (!store_) return failed_precondition("the engine has no store to resume from");
  KILN_ASSIGN_OR_RETURN(std::optional<RunRecord> recorded, read_run_record(*store_));
  if (!recorded) return not_found("Redis holds no run to resume (kiln:run is absent)");
  KILN_RETURN_IF_ERROR(check_record(*recorded));
  record_ = *recorded;
  if (options_.discover_gpu_models) {
    for (const std::string& model : recorded->gpu_models) add_gpu_model(model);
  }
  spent_before_ = record_.spent_s;

  // Replay the search log through the code that wrote it.
  replaying_ = true;
  std::string after;
  uint64_t steps = 0;
  Status replayed = Status::ok();
  while (replayed.is_ok()) {
    Result<std::vector<redis::StreamEvent>> page = store_->read_events(record_.id, after, 1000);
    if (!page.is_ok()) {
      replayed = page.status();
      break;
    }
    if (page->empty()) break;
    for (const redis::StreamEvent& ev : *page) {
      const Entry e(ev.fields.begin(), ev.fields.end());
      const std::string type = field(e, "type");
      if (type == "submit") {
        replayed = replay_submit(e);
      } else if (type == "result") {
        replayed = replay_result(e);
      } else if (type == "done") {
        std::optional<size_t> t = target_index(field(e, "target"), field(e, "gpu"));
        if (t) {
          targets_[*t]->report.state = field(e, "state");
          targets_[*t]->done = true;
        }
      }  // other types: written by a newer kiln for its readers; nothing to rebuild here
      if (!replayed.is_ok()) {
        replayed = replayed.with_context("replaying step " + ev.id + " (" + type + ") of run " + record_.id);
        break;
      }
      ++steps;
      after = ev.id;
    }
  }
  replaying_ = false;
  KILN_RETURN_IF_ERROR(replayed);
  // A new stream of draws: the old generator's state is not recorded.
  rng_.seed(options_.seed + 0x9E3779B97F4A7C15ULL * (steps + 1));

  const bool was_finished = record_.state == "finished" || finished();
  record_.seed = options_.seed;
  record_.gpu_models = record_models_;
  record_.patience = options_.limits.max_proposals_without_gain;
  record_.budget_s = options_.budget.count();
  record_.state = was_finished ? "finished" : "running";
  ++record_.starts;
  KILN_RETURN_IF_ERROR(store_->put_run(record_fields(record_)));
  begun_ = true;
  if (was_finished) {
    if (!pending_.empty()) spdlog::warn("resume: run {} finished with {} task(s) unanswered", record_.id, pending_.size());
    return Status::ok();
  }

  // What was in flight when the last coordinator stopped.
  size_t folded = 0, leased = 0, resent = 0;
  std::vector<std::string> open;
  for (const auto& [task, p] : pending_) open.push_back(task);
  for (const std::string& task : open) {
    auto it = pending_.find(task);
    if (it == pending_.end()) continue;
    const proto::EvaluateTask sent = it->second.task;
    // The dispatcher writes a result (under its task id) before the engine logs it: such a
    // result is folded in, not evaluated again.
    KILN_ASSIGN_OR_RETURN(auto stored, store_->find_results(sent.candidate_id));
    std::optional<proto::EvaluationResult> found;
    for (const auto& [arch, bytes] : stored) {
      Result<proto::Envelope> env = proto::decode(bytes);
      if (!env.is_ok() || env->id != task) continue;
      if (auto* r = std::get_if<proto::EvaluationResult>(&env->body)) found = *r;
    }
    if (found) {
      KILN_RETURN_IF_ERROR(store_->release_lease(task));
      results_.push_back(*found);
      KILN_RETURN_IF_ERROR(on_result(*found));
      ++folded;
      continue;
    }
    KILN_ASSIGN_OR_RETURN(std::optional<std::string> lease, store_->lease_payload(task));
    if (lease) {
      ++leased;  // Dispatcher::recover() below queues it again
      continue;
    }
    dispatcher_->submit(sent);  // logged, never handed out (or its answer was lost)
    ++resent;
  }
  KILN_ASSIGN_OR_RETURN(size_t recovered, dispatcher_->recover());
  // A kept child pending re-time whose re-time was never logged (a stop between the two steps) is
  // re-timed now.
  size_t retimes = 0;
  for (size_t t = 0; t < targets_.size(); ++t) {
    TargetState& st = *targets_[t];
    const std::optional<Individual>& crown = st.population.pending_crown();
    if (st.done || !crown || !st.backend || !st.backend->tunable || retimes_logged_.count(crown->id)) continue;
    Pending q;
    q.kind = Pending::Kind::kRetime;
    q.parent = *crown;
    auto own = st.sources.find(crown->id);  // an agent's child has a source of its own
    const std::string& source = own != st.sources.end() ? own->second : st.backend->tunable->source;
    KILN_RETURN_IF_ERROR(submit(t, std::move(q), source, crown->params, crown->id));
    ++retimes;
  }
  spdlog::info("resumed run {} ({} steps replayed, {:.0f} s already spent): {} result(s) folded in, "
               "{} task(s) re-queued from leases ({} leases), {} sent again, {} re-time(s) added",
               record_.id, steps, spent_before_, folded, recovered, leased, resent, retimes);
  return Status::ok();
}

Status Engine::discover_gpu_models() {
  bool added = false;
  for (const std::string& model : dispatcher_->evaluator_gpu_models(options_.backend)) {
    if (!add_gpu_model(model)) continue;
    added = true;
    spdlog::info("an evaluator of a new GPU model connected ({}): {} target(s) get a population on it",
                 model.empty() ? "none named" : model, specs_.size());
  }
  if (!added || !store_ || !begun_) return Status::ok();
  record_.gpu_models = record_models_;
  return store_->put_run({{"gpu_models", join_models(record_.gpu_models)}})
      .with_context("recording the run's GPU models in Redis");
}

Status Engine::save_progress() {
  if (!store_ || !begun_) return Status::ok();
  record_.spent_s = spent_s();
  if (finished()) record_.state = "finished";
  return store_->put_run({{"spent_s", num(record_.spent_s)}, {"state", record_.state}});
}

void Engine::allocate() {
  // Slots go where Amdahl's law says the end-to-end gain is largest: a target far from its floor
  // that takes a large share of the time gets more of them (allocate_slots in search.h).
  std::vector<TargetShare> shares;
  std::vector<size_t> index;
  for (size_t t = 0; t < targets_.size(); ++t) {
    TargetState& st = *targets_[t];
    st.slots = 1;  // a target being set up (its seed) needs one
    if (st.done || !st.seed_verified || st.report.best_us <= 0) continue;
    TargetShare s;
    s.target = st.spec.name;
    s.weight = options_.weights.count(s.target) ? options_.weights.at(s.target) : 0;
    s.best_us = st.report.best_us;
    s.seed_us = st.report.seed_us;
    s.floor_us = st.floor_us();
    s.converged = st.exhausted;
    shares.push_back(s);
    index.push_back(t);
  }
  if (shares.empty()) return;
  const uint32_t total = options_.in_flight_per_target * static_cast<uint32_t>(shares.size());
  Result<std::vector<SlotAllocation>> a = allocate_slots(shares, total);
  if (!a.is_ok()) {
    for (size_t i : index) targets_[i]->slots = options_.in_flight_per_target;
    return;
  }
  for (size_t k = 0; k < index.size(); ++k) targets_[index[k]]->slots = std::max<uint32_t>(1, (*a)[k].slots);
}

std::vector<TargetReport> Engine::reports() const {
  std::vector<TargetReport> out;
  for (const auto& t : targets_) out.push_back(t->report);
  return out;
}

Status Engine::run(const std::atomic<bool>& stop,
                   const std::function<void(const std::vector<TargetReport>&)>& progress) {
  if (store_ && !begun_) KILN_RETURN_IF_ERROR(begin());
  start_ = Clock::now();
  running_ = true;
  auto last_progress = start_;
  size_t quarantined_seen = 0;
  while (!stop.load()) {
    // The budget counts search time over every coordinator process of the run (not the time
    // between a crash and its resume).
    const double elapsed = spent_s();
    const bool budget_spent = options_.budget.count() > 0 && elapsed >= options_.budget.count();
    if (options_.discover_gpu_models) KILN_RETURN_IF_ERROR(discover_gpu_models());
    allocate();
    bool all_done = true;
    for (size_t t = 0; t < targets_.size(); ++t) {
      TargetState& st = *targets_[t];
      if (!st.done && st.seed_verified) {
        ConvergenceState cs;
        cs.proposals_since_improvement = st.population.proposals_since_improvement();
        cs.best_us = st.report.best_us;
        cs.seed_us = st.report.seed_us;
        cs.floor_us = st.floor_us();
        cs.elapsed_s = elapsed;
        std::optional<std::string> why = convergence_reason(options_.limits, cs);
        // The budget first: a target that stopped proposing because the budget was spent (exhausted
        // is set below while its last tasks finish) did not run out of configurations.
        if (!why && budget_spent) why = "stopped: time budget spent";
        if (!why && st.exhausted && st.in_flight == 0) why = "converged: every configuration near the parents was evaluated";
        if (why && st.in_flight == 0) {
          KILN_RETURN_IF_ERROR(mark_done(t, *why));
        } else if (why) {
          st.exhausted = true;  // no new proposals; wait for what is in flight
        }
      } else if (!st.done && budget_spent && st.in_flight == 0) {
        KILN_RETURN_IF_ERROR(mark_done(t, "stopped: time budget spent before the seed was evaluated"));
      }
      if (!st.done && !budget_spent) KILN_RETURN_IF_ERROR(top_up(t));
      all_done = all_done && st.done;
    }
    if (targets_.empty() && budget_spent) break;  // no evaluator ever brought a GPU model
    if (all_done && (!targets_.empty() || !options_.discover_gpu_models)) break;
    KILN_ASSIGN_OR_RETURN(std::vector<proto::EvaluationResult> got, dispatcher_->poll(100));
    for (const auto& r : got) {
      results_.push_back(r);
      KILN_RETURN_IF_ERROR(on_result(r));
    }
    for (const auto& p : dispatcher_->take_proposals()) KILN_RETURN_IF_ERROR(on_proposal(p));
    // Poison: a quarantined task is a failed evaluation of its candidate.
    for (; quarantined_seen < dispatcher_->quarantined().size(); ++quarantined_seen) {
      const Quarantined& q = dispatcher_->quarantined()[quarantined_seen];
      proto::EvaluationResult r;
      r.task_id = q.task.task_id;
      r.candidate_id = q.task.candidate_id;
      r.outcome = proto::Outcome::kCrash;
      r.log = q.reason;
      results_.push_back(r);
      KILN_RETURN_IF_ERROR(on_result(r));
    }
    if (Clock::now() - last_progress >= std::chrono::seconds(1)) {
      last_progress = Clock::now();
      KILN_RETURN_IF_ERROR(save_progress().with_context("recording the time spent in Redis"));
      if (progress) progress(reports());
    }
  }
  KILN_RETURN_IF_ERROR(save_progress().with_context("recording the time spent in Redis"));
  running_ = false;
  spent_before_ = record_.spent_s;
  if (progress) progress(reports());
  return Status::ok();
}

}  // namespace kiln::coordinator
