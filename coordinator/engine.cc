// Engine: see engine.h.
#include "coordinator/engine.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>

#include "evaluator/evaluation.h"
#include "shared/hash.h"

namespace kiln::coordinator {
namespace {

using Clock = std::chrono::steady_clock;

int64_t epoch_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

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
    const BackendSpec* b = spec.backend(options_.backend);
    auto list = [&](const Shape& at, const std::string& shape) {
      std::vector<Params>& configs = configs_[unit_key(spec.name, "", shape)];
      if (!b || !b->tunable) return;
      eval::for_each_config(*b->tunable, at, b->dtypes.front(), [&](const Params& p) {
        configs.push_back(p);
        return true;
      });
    };
    auto swept = options_.shapes.find(spec.name);
    if (swept == options_.shapes.end()) {
      list(spec.benchmark_for(options_.backend), "");
    } else {
      for (const Shape& at : swept->second) list(at, shape_string(at));
    }
  }
  for (const std::string& model : options_.gpu_models) add_gpu_model(model);
}

bool Engine::add_gpu_model(const std::string& model) {
  if (std::find(record_models_.begin(), record_models_.end(), model) != record_models_.end()) return false;
  record_models_.push_back(model);
  for (const TargetSpec& spec : specs_) {
    auto swept = options_.shapes.find(spec.name);
    if (swept == options_.shapes.end()) {
      targets_.push_back(
          std::make_unique<TargetSearch>(spec, model, options_.backend, options_.search));
      continue;
    }
    for (const Shape& at : swept->second) {
      targets_.push_back(
          std::make_unique<TargetSearch>(spec, model, options_.backend, options_.search, at));
    }
  }
  return true;
}

const std::vector<Params>& Engine::configs_of(size_t t) const {
  const TargetSearch& st = *targets_[t];
  return configs_.at(unit_key(st.spec.name, "", st.shape));
}

Engine::~Engine() = default;

std::optional<size_t> Engine::target_index(std::string_view name, std::string_view gpu_model,
                                           std::string_view shape) const {
  for (size_t t = 0; t < targets_.size(); ++t) {
    const TargetSearch& st = *targets_[t];
    if (st.spec.name == name && st.gpu_model == gpu_model && st.shape == shape) return t;
  }
  return std::nullopt;
}

bool Engine::finished() const {
  // A run that discovers its GPU models is not over before an evaluator brought one.
  if (targets_.empty()) return !options_.discover_gpu_models && specs_.empty();
  return std::all_of(targets_.begin(), targets_.end(), [](const auto& t) { return t->done(); });
}

const Population* Engine::population(std::string_view target, std::string_view gpu_model,
                                     std::string_view shape) const {
  std::optional<size_t> t = target_index(target, gpu_model, shape);
  return t ? &targets_[*t]->population : nullptr;
}

std::vector<std::string> Engine::submitted(std::string_view target, std::string_view gpu_model,
                                           std::string_view shape) const {
  std::optional<size_t> t = target_index(target, gpu_model, shape);
  return t ? targets_[*t]->submitted : std::vector<std::string>();
}

double Engine::spent_s() const {
  if (!running_) return spent_before_;
  return spent_before_ + std::chrono::duration<double>(Clock::now() - start_).count();
}

Status Engine::write(const redis::SearchStep& step) {
  if (!store_ || replaying_) return Status::ok();
  return store_->write_step(record_.id, step);
}

RunRecord Engine::this_run() const {
  RunRecord r;
  for (const TargetSpec& spec : specs_) {
    r.targets.push_back(spec.name);
    r.spec_hashes[spec.name] = spec.spec_hash;
  }
  r.backend = options_.backend;
  r.gpu_models = record_models_;
  r.shapes = sweep_labels(options_.shapes);
  r.toolchain = options_.toolchain;
  r.seed = options_.seed;
  r.islands = options_.search.islands;
  r.capacity = options_.search.capacity;
  r.patience = options_.limits.max_proposals_without_gain;
  r.budget_s = options_.budget.count();
  return r;
}

Status Engine::begin() {
  if (!store_) return failed_precondition("the engine has no store to record the run in");
  KILN_ASSIGN_OR_RETURN(std::optional<RunRecord> existing, read_run_record(*store_));
  if (existing) {
    return Status(StatusCode::kAlreadyExists,
                  "Redis already holds run " + run_summary(*existing) +
                      ": resume it, or start a new run on an empty database");
  }
  record_ = this_run();
  record_.id = "run-" + std::to_string(epoch_ms());
  record_.state = "running";
  record_.starts = 1;
  KILN_RETURN_IF_ERROR(write_run_record(*store_, record_));
  begun_ = true;
  return Status::ok();
}

void Engine::track(Pending p) {
  TargetSearch& st = *targets_[p.target];
  ++st.in_flight;
  if (p.kind != TaskKind::kRetime) st.submitted.push_back(p.task.candidate_id);
  const std::string task_id = p.task.task_id;
  pending_[task_id] = std::move(p);
}

bool Engine::runs_seed_kernel(TaskKind kind, const std::string& op) {
  // Every child is a configuration of the template (agents' candidates too: fits_template), so
  // the seed's kernel runs only for the seed and its re-times.
  return kind == TaskKind::kSeed || (kind == TaskKind::kRetime && op == "seed");
}

proto::EvaluateTask Engine::task_for(const TargetSearch& st, const std::string& task_id,
                                     const std::string& id, const std::string& source,
                                     const Params& params, bool seed_kernel) const {
  proto::EvaluateTask task;
  task.task_id = task_id;
  task.candidate_id = id;
  task.target = st.spec.name;
  task.backend = options_.backend;
  task.gpu_model = st.gpu_model;
  if (!st.shape.empty()) task.shape = st.bench;
  task.spec_hash = st.spec.spec_hash;
  // The kind names the kernel (entry point, launch geometry) the evaluator builds the source as.
  // It is never read off the parameters: a seed's defines may be template parameter names too
  // (a Triton seed's BLOCK and num_warps).
  task.kind = std::string(seed_kernel ? proto::kKindSeed : proto::kKindTemplate);
  task.source = source;
  task.params = params;
  task.dtypes = {std::string(dtype_name(st.dtype))};
  return task;
}

Status Engine::submit(size_t t, Pending p, const std::string& source, const Params& params,
                      const std::string& id) {
  TargetSearch& st = *targets_[t];
  const uint64_t seq = ++task_seq_;
  const Individual& subject = p.kind == TaskKind::kRetime ? p.parent : p.child;
  p.task = task_for(st, "t" + std::to_string(seq) + "-" + id.substr(0, 16), id, source, params,
                    runs_seed_kernel(p.kind, subject.op));
  proto::EvaluateTask& task = p.task;
  // A new best is profiled at its re-time: its bottleneck class guides the children it gets.
  task.profile = p.kind == TaskKind::kRetime && options_.profile_new_bests;
  if (options_.early_stop && p.kind == TaskKind::kChild && p.parent.median_us > 0)
    task.early_stop_us = p.parent.median_us * EngineOptions::kEarlyStopFactor;
  p.target = t;
  p.source = source;
  if (store_) {
    // Logged before it is sent: a coordinator that dies in between finds it on resume.
    SubmitEvent e;
    e.seq = seq;
    e.target = st.spec.name;
    e.gpu_model = st.gpu_model;
    e.shape = st.shape;
    e.task = task.task_id;
    e.candidate = id;
    e.kind = p.kind;
    e.params = params;
    e.source_hash = sha256_hex(source);
    e.island = subject.island;
    e.parent = subject.parent_id;
    e.op = subject.op;
    e.model = p.model;
    e.generation = subject.generation;
    e.parent_us = p.parent.median_us;
    e.parent_noise = p.parent.noise_rel;
    e.median_us = p.parent.median_us;
    e.noise_rel = p.parent.noise_rel;
    redis::SearchStep step = step_of(e);
    if (sources_written_.insert(e.source_hash).second) step.sources.push_back(source);
    Status written = write(step);
    if (!written.is_ok()) {
      sources_written_.erase(e.source_hash);
      return written.with_context("recording task " + task.task_id + " in Redis");
    }
  }
  dispatcher_->submit(task, /*urgent=*/p.kind == TaskKind::kRetime);
  track(std::move(p));
  return Status::ok();
}

Status Engine::top_up(size_t t) {
  TargetSearch& st = *targets_[t];
  if (st.done()) return Status::ok();
  if (st.phase() == Phase::kStarting) {
    const KernelSpec& seed = st.backend->seed;
    const std::string id = st.candidate_id_of(seed.source, seed.defines, options_.toolchain);
    Pending p;
    p.kind = TaskKind::kSeed;
    p.child.id = id;
    p.child.params = seed.defines;
    p.child.op = "seed";
    KILN_RETURN_IF_ERROR(submit(t, std::move(p), seed.source, seed.defines, id));
    st.seed_sent(id, seed.source);
    return Status::ok();
  }
  if (!st.seed_verified || !st.proposer || st.exhausted) return Status::ok();
  const KernelSpec& tmpl = *st.backend->tunable;
  const size_t islands = st.population.islands().size();
  while (st.in_flight < st.slots) {
    const size_t island = st.next_island++ % islands;
    const Individual* parent = st.population.select_parent(island, rng_);
    if (!parent) break;
    Params child;
    std::string op;
    // An agent is asked about any parent, the seed too: a template that never beats the seed
    // must not keep a model from ever seeing the target.
    const bool ask = !replaying_ && st.asking < options_.agent_asks_per_target &&
                     dispatcher_->agents() > 0 && st.agent_may_ask(parent->id);
    if (auto transfer = transfer_child(t)) {
      // A neighbour's best first (judged against this parent like any child).
      child = std::move(transfer->first);
      op = "transfer " + transfer->second;
    } else if (st.is_seed(*parent)) {
      if (ask) {
        ask_agent(t, *parent, nullptr, static_cast<uint32_t>(island));
        continue;
      }
      std::optional<Params> config = st.template_child(configs_of(t), options_.toolchain, rng_);
      if (config) {
        child = std::move(*config);
        op = "template";
      }
    } else {
      const Individual* second = st.second_parent(island, *parent, rng_);
      if (ask) {
        ask_agent(t, *parent, second, static_cast<uint32_t>(island));
        continue;
      }
      std::tie(child, op) =
          st.builtin_child(*parent, second, options_.profile_guidance, options_.toolchain, rng_);
    }
    if (child.empty()) {
      st.exhausted = true;
      break;
    }
    const std::string id = st.candidate_id_of(tmpl.source, child, options_.toolchain);
    KILN_RETURN_IF_ERROR(submit_child(t, *parent, static_cast<uint32_t>(island), id, tmpl.source,
                                      child, std::move(op)));
  }
  return Status::ok();
}

Status Engine::submit_child(size_t t, const Individual& parent, uint32_t island,
                            const std::string& id, const std::string& source, const Params& params,
                            std::string op, std::string model) {
  targets_[t]->child_proposed(id, source, params, island, parent.id);
  Pending p;
  p.kind = TaskKind::kChild;
  p.parent = parent;
  p.child.id = id;
  p.child.params = params;
  p.child.parent_id = parent.id;
  p.child.op = std::move(op);
  p.child.generation = parent.generation + 1;
  p.child.island = island;
  p.model = std::move(model);
  return submit(t, std::move(p), source, params, id);
}

Status Engine::on_result(const proto::EvaluationResult& r) {
  auto it = pending_.find(r.task_id);
  if (it == pending_.end()) return Status::ok();
  Pending p = std::move(it->second);
  pending_.erase(it);
  TargetSearch& st = *targets_[p.target];
  st.result_arrived(r);
  Judgement j;
  switch (p.kind) {
    case TaskKind::kSeed:
      j = st.judge_seed(r, p.source);
      break;
    case TaskKind::kChild:
      p.child.median_us = r.timing.median_us;
      p.child.noise_rel = r.timing.noise_rel;
      j = st.judge_child(p.parent, p.child, p.source, r);
      break;
    case TaskKind::kRetime:
      j = st.judge_retime(p.parent, p.source, r);
      if (!replaying_ && j.verdict != Verdict::kFailed) {
        spdlog::info("{}: re-timed {}: {}", st.spec.name, p.parent.id.substr(0, 12), j.reason);
      }
      break;
  }
  const Individual& subject = p.kind == TaskKind::kRetime ? p.parent : p.child;
  const double at_s = replaying_ ? replay_at_s_ : spent_s();
  contexts_[r.task_id] = {st.spec.name,
                          st.gpu_model,
                          st.shape,
                          p.task.params,
                          p.kind,
                          j.verdict,
                          sha256_hex(p.task.source),
                          subject.parent_id,
                          subject.op,
                          p.model,
                          subject.island,
                          at_s};
  if (p.kind == TaskKind::kChild && j.verdict == Verdict::kKept && !p.model.empty())
    ++llm_use_[p.model].accepted;
  // The judged result as one step of the search log, with the keys it changes.
  if (store_ && !replaying_) {
    ResultEvent e;
    e.target = st.spec.name;
    e.gpu_model = st.gpu_model;
    e.shape = st.shape;
    e.kind = p.kind;
    e.verdict = j.verdict;
    e.reason = j.reason;
    e.at_s = at_s;
    e.result = r;
    redis::SearchStep step = step_of(e, st.standing());
    if (j.islands_changed) step.populations = st.population_members();
    KILN_RETURN_IF_ERROR(
        write(step).with_context("recording the result of task " + r.task_id + " in Redis"));
  }
  // The judged step first, then the re-time's own submit step: a resume that finds a kept child
  // pending re-time without the second sends the re-time again.
  if (j.needs_retime && !replaying_) {
    Pending q;
    q.kind = TaskKind::kRetime;
    q.parent = p.child;
    KILN_RETURN_IF_ERROR(submit(p.target, std::move(q), p.source, p.child.params, p.child.id));
  }
  return Status::ok();
}

const Engine::ResultContext* Engine::context_of(const std::string& task_id) const {
  auto it = contexts_.find(task_id);
  return it == contexts_.end() ? nullptr : &it->second;
}

uint64_t Engine::abandon_in_flight(size_t t) {
  uint64_t n = 0;
  for (auto it = pending_.begin(); it != pending_.end();) {
    if (it->second.target != t) {
      ++it;
      continue;
    }
    spdlog::warn("{}: task {} abandoned: no result {} s after the budget", targets_[t]->key,
                 it->first, grace().count());
    it = pending_.erase(it);
    ++n;
  }
  targets_[t]->in_flight = 0;
  abandoned_ += n;
  return n;
}

std::chrono::seconds Engine::grace() const {
  if (options_.budget_grace.count() > 0) return options_.budget_grace;
  return std::clamp(options_.budget / 10, std::chrono::seconds(10), std::chrono::seconds(120));
}

double Engine::overrun_s() const {
  if (options_.budget.count() <= 0) return 0;
  return std::max(0.0, spent_s() - static_cast<double>(options_.budget.count()));
}

Status Engine::mark_done(size_t t, const Ending& ending) {
  TargetSearch& st = *targets_[t];
  st.finish(ending.phase, ending.state);
  DoneEvent e{st.spec.name, st.gpu_model, ending.phase, ending.state, st.shape};
  return write(step_of(e)).with_context("recording that " + st.key + " is done in Redis");
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
  return write_run_gpu_models(*store_, record_)
      .with_context("recording the run's GPU models in Redis");
}

Status Engine::save_progress() {
  if (!store_ || !begun_) return Status::ok();
  record_.spent_s = spent_s();
  if (finished()) record_.state = "finished";
  return write_run_progress(*store_, record_);
}

void Engine::allocate() {
  // Slots go where Amdahl's law says the end-to-end gain is largest: a target far from its floor
  // that takes a large share of the time gets more of them (allocate_slots in search.h).
  std::vector<TargetShare> shares;
  std::vector<size_t> index;
  for (size_t t = 0; t < targets_.size(); ++t) {
    TargetSearch& st = *targets_[t];
    st.slots = 1;  // a target being set up (its seed) needs one
    if (st.done() || !st.seed_verified || st.report().best_us <= 0) continue;
    auto w = options_.weights.find(st.spec.name);
    shares.push_back(st.share(w != options_.weights.end() ? w->second : 0));
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
  for (const auto& t : targets_) out.push_back(t->report());
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
    // Past the grace period nothing in flight is waited for: an evaluator that hangs, or none
    // left at all, cannot keep the run going.
    const bool grace_over = budget_spent && elapsed >= options_.budget.count() + grace().count();
    if (options_.discover_gpu_models) KILN_RETURN_IF_ERROR(discover_gpu_models());
    allocate();
    bool all_done = true;
    for (size_t t = 0; t < targets_.size(); ++t) {
      TargetSearch& st = *targets_[t];
      if (std::optional<Ending> ending = st.ending(options_.limits, elapsed, budget_spent)) {
        if (st.in_flight > 0 && grace_over) {
          const uint64_t n = abandon_in_flight(t);
          ending->state += "; " + std::to_string(n) + " evaluation(s) in flight abandoned " +
                           std::to_string(grace().count()) + " s after the budget";
        }
        if (st.in_flight == 0) {
          KILN_RETURN_IF_ERROR(mark_done(t, *ending));
        } else if (st.seed_verified) {
          st.exhausted = true;  // no new proposals; wait for what is in flight
        }
      }
      if (!st.done() && !budget_spent) KILN_RETURN_IF_ERROR(top_up(t));
      all_done = all_done && st.done();
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
