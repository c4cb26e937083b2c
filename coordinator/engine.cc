// Engine: see engine.h.
#include "coordinator/engine.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "evaluator/evaluation.h"

namespace kiln::coordinator {
namespace {

using Clock = std::chrono::steady_clock;
using Params = std::map<std::string, std::string>;

std::string label_of(const Params& params, const KernelSpec& tmpl) {
  std::string s;
  for (const auto& [k, v] : params) {
    if (!tmpl.space.count(k)) continue;
    s += (s.empty() ? "" : ",") + k + "=" + v;
  }
  return s.empty() ? "seed" : "template " + s;
}

}  // namespace

struct Engine::TargetState {
  TargetSpec spec;
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
  uint32_t slots = 1;  // evaluations it may have queued or running (allocate_slots below)
  uint32_t next_island = 0;

  // The physical floor at the benchmark shape, from the best's measured fraction of it; 0 when
  // unknown (the cpu backend measures none).
  double floor_us() const {
    return report.fraction_of_floor > 0 ? report.best_us * report.fraction_of_floor : 0;
  }

  TargetState(TargetSpec s, const std::string& backend_name, const SearchParams& params)
      : spec(std::move(s)), population(spec.name, backend_name, params) {}
};

Engine::Engine(std::vector<TargetSpec> targets, Dispatcher& dispatcher, EngineOptions options)
    : dispatcher_(&dispatcher), options_(std::move(options)), rng_(options_.seed) {
  for (auto& spec : targets) {
    auto st = std::make_unique<TargetState>(std::move(spec), options_.backend, options_.search);
    st->backend = st->spec.backend(options_.backend);
    st->bench = st->spec.benchmark_for(options_.backend);
    st->dtype = st->backend ? st->backend->dtypes.front() : DType::kF32;
    st->report.target = st->spec.name;
    if (!st->backend) {
      st->report.state = "failed: no kernels for the " + options_.backend + " backend";
      st->done = true;
    } else if (st->backend->tunable) {
      st->proposer = std::make_unique<agent::BuiltinProposer>(*st->backend->tunable, st->bench, st->dtype);
    }
    targets_.push_back(std::move(st));
  }
}

Engine::~Engine() = default;

std::string Engine::submit(size_t t, Pending::Kind kind, const std::string& source, const Params& params,
                           const std::string& id) {
  TargetState& st = *targets_[t];
  proto::EvaluateTask task;
  task.task_id = "t" + std::to_string(++task_seq_) + "-" + id.substr(0, 16);
  task.candidate_id = id;
  task.target = st.spec.name;
  task.backend = options_.backend;
  task.source = source;
  task.params = params;
  task.dtypes = {std::string(dtype_name(st.dtype))};
  dispatcher_->submit(task);
  ++st.in_flight;
  Pending p;
  p.target = t;
  p.kind = kind;
  p.source = source;
  pending_[task.task_id] = std::move(p);
  return task.task_id;
}

void Engine::top_up(size_t t) {
  TargetState& st = *targets_[t];
  if (st.done) return;
  if (st.report.state == "starting") {
    const KernelSpec& seed = st.backend->seed;
    const std::string id = candidate_id(st.spec.spec_hash, options_.backend, seed.source, seed.defines,
                                        options_.toolchain);
    st.seen.insert(id);
    st.sources[id] = seed.source;
    submit(t, Pending::Kind::kSeed, seed.source, seed.defines, id);
    st.report.state = "evaluating the seed";
    return;
  }
  if (!st.seed_verified || !st.proposer || st.exhausted) return;
  const KernelSpec& tmpl = *st.backend->tunable;
  const size_t islands = st.population.islands().size();
  while (st.in_flight < st.slots) {
    const size_t island = st.next_island++ % islands;
    const Individual* parent = st.population.select_parent(island, rng_);
    if (!parent) break;
    auto id_of = [&](const Params& p) {
      return candidate_id(st.spec.spec_hash, options_.backend, tmpl.source, p, options_.toolchain);
    };
    auto seen = [&](const Params& p) { return st.seen.contains(id_of(p)); };
    Params child;
    std::string op;
    if (parent->op == "seed") {
      // The seed is another kernel: its children are template configurations, the first in the
      // space's order, then random ones.
      std::vector<Params> fresh;
      eval::for_each_config(tmpl, st.bench, st.dtype, [&](const Params& p) {
        if (!seen(p)) fresh.push_back(p);
        return fresh.size() < 64;
      });
      if (!fresh.empty()) {
        child = st.seen.size() == 1 ? fresh.front() : fresh[rng_() % fresh.size()];
        op = "template";
      }
    } else {
      const Individual* second = nullptr;
      const auto& elites = st.population.island(island).elites();
      if (elites.size() > 1 && rng_() % 4 == 0) second = &elites[rng_() % elites.size()];
      if (second && (second->id == parent->id || second->op == "seed")) second = nullptr;
      agent::Proposal p = st.proposer->propose(parent->params, second ? &second->params : nullptr, seen, rng_);
      child = p.params;
      op = p.operator_name;
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
    Pending* p = &pending_[submit(t, Pending::Kind::kChild, tmpl.source, child, id)];
    p->parent = *parent;
    p->child.id = id;
    p->child.params = child;
    p->child.parent_id = parent->id;
    p->child.op = op;
    p->child.generation = parent->generation + 1;
    p->child.island = static_cast<uint32_t>(island);
  }
}

void Engine::on_result(const proto::EvaluationResult& r) {
  auto it = pending_.find(r.task_id);
  if (it == pending_.end()) return;
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
  auto crown = [&](const Individual& best) {
    st.report.best_us = best.median_us;
    st.report.best_id = best.id;
    st.report.best_params = best.params;
    st.report.best_source = p.source;
    st.report.best_label = best.op == "seed" ? "seed" : label_of(best.params, *st.backend->tunable);
    st.report.fraction_of_floor = st.fraction_of_floor.count(best.id) ? st.fraction_of_floor[best.id] : 0;
  };
  switch (p.kind) {
    case Pending::Kind::kSeed: {
      if (!ok) {
        st.report.state = "failed: the seed did not verify (" + proto::outcome_name(r.outcome) + "): " +
                          r.log.substr(0, 200);
        st.done = true;
        return;
      }
      Individual seed;
      seed.id = r.candidate_id;
      seed.params = st.backend->seed.defines;
      seed.median_us = r.timing.median_us;
      seed.noise_rel = r.timing.noise_rel;
      seed.op = "seed";
      st.population.add_seed(seed);
      st.seed_verified = true;
      st.report.seed_us = seed.median_us;
      crown(seed);
      st.report.state = st.proposer ? "searching" : "converged: no template to search";
      st.done = !st.proposer;
      return;
    }
    case Pending::Kind::kChild: {
      if (st.proposer) st.proposer->report(p.child.params, false);
      if (!ok) return;
      p.child.median_us = r.timing.median_us;
      p.child.noise_rel = r.timing.noise_rel;
      Result<Decision> d = st.population.offer_child(p.parent, p.child);
      if (!d.is_ok()) {
        spdlog::warn("{}: {}", st.spec.name, d.status().to_string());
        return;
      }
      if (d->keep) {
        ++st.report.accepted;
        if (st.proposer) st.proposer->report(p.child.params, true);
      }
      spdlog::debug("{}: {} {} -> {}", st.spec.name, p.child.op, p.child.id.substr(0, 12), d->reason);
      if (d->needs_retime) {
        Pending* q = &pending_[submit(p.target, Pending::Kind::kRetime, p.source, p.child.params, p.child.id)];
        q->parent = p.child;
      }
      return;
    }
    case Pending::Kind::kRetime: {
      if (!ok) return;  // the pending crown stays pending until a later one replaces it
      CrownStep c = st.population.confirm_crown(p.parent.id, r.timing.median_us, r.timing.noise_rel);
      if (c.state == CrownState::kCrowned && st.population.crowned()) crown(*st.population.crowned());
      spdlog::info("{}: re-timed {}: {}", st.spec.name, p.parent.id.substr(0, 12), c.reason);
      return;
    }
  }
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
  start_ = Clock::now();
  auto last_progress = start_;
  size_t quarantined_seen = 0;
  while (!stop.load()) {
    const double elapsed = std::chrono::duration<double>(Clock::now() - start_).count();
    const bool budget_spent = options_.budget.count() > 0 && elapsed >= options_.budget.count();
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
        if (!why && st.exhausted && st.in_flight == 0) why = "converged: every configuration near the parents was evaluated";
        if (!why && budget_spent) why = "stopped: time budget spent";
        if (why && st.in_flight == 0) {
          st.report.state = *why;
          st.done = true;
        } else if (why) {
          st.exhausted = true;  // no new proposals; wait for what is in flight
        }
      } else if (!st.done && budget_spent && st.in_flight == 0) {
        st.report.state = "stopped: time budget spent before the seed was evaluated";
        st.done = true;
      }
      if (!st.done && !budget_spent) top_up(t);
      all_done = all_done && st.done;
    }
    if (all_done) break;
    KILN_ASSIGN_OR_RETURN(std::vector<proto::EvaluationResult> got, dispatcher_->poll(100));
    for (const auto& r : got) {
      results_.push_back(r);
      on_result(r);
    }
    // Poison: a quarantined task is a failed evaluation of its candidate.
    for (; quarantined_seen < dispatcher_->quarantined().size(); ++quarantined_seen) {
      const Quarantined& q = dispatcher_->quarantined()[quarantined_seen];
      proto::EvaluationResult r;
      r.task_id = q.task.task_id;
      r.candidate_id = q.task.candidate_id;
      r.outcome = proto::Outcome::kCrash;
      r.log = q.reason;
      results_.push_back(r);
      on_result(r);
    }
    if (progress && Clock::now() - last_progress >= std::chrono::seconds(1)) {
      last_progress = Clock::now();
      progress(reports());
    }
  }
  if (progress) progress(reports());
  return Status::ok();
}

}  // namespace kiln::coordinator
