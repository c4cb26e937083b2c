// One target's search: see target_search.h.
#include "coordinator/target_search.h"

#include <spdlog/spdlog.h>

#include "evaluator/evaluation.h"
#include "shared/redis_keys.h"

namespace kiln::coordinator {
namespace {

bool verified(const proto::EvaluationResult& r) {
  return r.outcome == proto::Outcome::kVerified && r.timing.median_us > 0;
}

std::string label_of(const Params& params, const KernelSpec& tmpl) {
  std::string s;
  for (const auto& [k, v] : params) {
    if (!tmpl.space.count(k)) continue;
    s += (s.empty() ? "" : ",") + k + "=" + v;
  }
  return s.empty() ? "seed" : "template " + s;
}

}  // namespace

std::string agent_operator(const std::string& agent_op) {
  return "agent " + (agent_op.empty() ? std::string("proposal") : agent_op);
}

bool from_llm_agent(const std::string& op) { return op.rfind("agent llm", 0) == 0; }

TargetSearch::TargetSearch(TargetSpec s, std::string model, const std::string& backend_name,
                           const SearchParams& params, std::optional<Shape> at)
    : spec(std::move(s)),
      gpu_model(std::move(model)),
      shape(at ? shape_string(*at) : ""),
      key(unit_key(spec.name, gpu_model, shape)),
      // kiln:pop:{target}:{model}:{island}; a sweep's shape goes with the target part.
      population(shape.empty() ? spec.name : spec.name + "-" + shape,
                 gpu_model.empty() ? backend_name : redis::keys::safe_key_component(gpu_model),
                 params),
      // Candidate ids name the GPU model and the sweep's shape: a time belongs to both.
      id_backend_((gpu_model.empty() ? backend_name : backend_name + "@" + gpu_model) +
                  (shape.empty() ? "" : "-" + shape)) {
  backend = spec.backend(backend_name);
  bench = at ? *at : spec.benchmark_for(backend_name);
  dtype = backend ? backend->dtypes.front() : DType::kF32;
  report_.target = spec.name;
  report_.gpu_model = gpu_model;
  report_.shape = shape;
  if (!backend) {
    finish(Phase::kFailed, "failed: no kernels for the " + backend_name + " backend");
  } else if (backend->tunable) {
    proposer = std::make_unique<agent::BuiltinProposer>(*backend->tunable, bench, dtype);
  }
}

void TargetSearch::enter(Phase phase) {
  KILN_CHECK(!is_final(phase), "TargetSearch::enter takes a phase that is not final");
  phase_ = phase;
  report_.state = std::string(phase_name(phase));
}

void TargetSearch::finish(Phase final_phase, std::string state) {
  KILN_CHECK(is_final(final_phase) && final_phase_of(state) == final_phase,
             "TargetSearch::finish: the state must begin with the final phase's name");
  phase_ = final_phase;
  report_.state = std::move(state);
}

std::string TargetSearch::candidate_id_of(const std::string& source, const Params& params,
                                          const std::string& toolchain) const {
  return candidate_id(spec.spec_hash, id_backend_, source, params, toolchain);
}

double TargetSearch::floor_us() const {
  return report_.fraction_of_floor > 0 ? report_.best_us * report_.fraction_of_floor : 0;
}

void TargetSearch::seed_sent(const std::string& id, const std::string& source) {
  seen.insert(id);
  sources[id] = source;
  enter(Phase::kEvaluatingSeed);
}

void TargetSearch::child_proposed(const std::string& id, const std::string& source,
                                  const Params& params, uint32_t island,
                                  const std::string& parent_id) {
  seen.insert(id);
  if (backend && backend->tunable && source != backend->tunable->source) {
    sources[id] = source;
  } else if (!params.empty()) {
    template_configs.push_back(params);
    if (template_configs.size() > proto::ProposeTask::kMaxEvaluatedSent)
      template_configs.pop_front();
  }
  Status counted = population.record_proposal(island, parent_id);
  (void)counted;  // a parent dropped since still counts towards convergence
}

std::optional<Params> TargetSearch::template_child(const std::vector<Params>& configs,
                                                   const std::string& toolchain,
                                                   std::mt19937_64& rng) const {
  // The seed is another kernel: its children are template configurations, the first in the
  // space's order, then random ones.
  std::vector<Params> fresh;
  for (const Params& p : configs) {
    if (!seen.contains(candidate_id_of(backend->tunable->source, p, toolchain))) fresh.push_back(p);
    if (fresh.size() >= 64) break;
  }
  if (fresh.empty()) return std::nullopt;
  return seen.size() == 1 ? fresh.front() : fresh[rng() % fresh.size()];
}

const Individual* TargetSearch::second_parent(size_t island, const Individual& parent,
                                              std::mt19937_64& rng) const {
  const Individual* second = nullptr;
  const auto& elites = population.island(island).elites();
  if (elites.size() > 1 && rng() % 4 == 0) second = &elites[rng() % elites.size()];
  if (second && (second->id == parent.id || is_seed(*second))) second = nullptr;
  return second;
}

std::pair<Params, std::string> TargetSearch::builtin_child(const Individual& parent,
                                                           const Individual* second, bool guidance,
                                                           const std::string& toolchain,
                                                           std::mt19937_64& rng) {
  const std::string& source = backend->tunable->source;
  auto seen_fn = [&](const Params& p) {
    return seen.contains(candidate_id_of(source, p, toolchain));
  };
  const auto bn = bottleneck.find(parent.id);
  const std::string guide = guidance && bn != bottleneck.end() ? bn->second : "";
  agent::Proposal p = proposer->propose_guided(parent.params, second ? &second->params : nullptr,
                                               guide, seen_fn, rng);
  // The operator as recorded with the child (kiln:cand:{id} "operator"): with the class that
  // steered it when the parent's profile did.
  std::string op = p.operator_name;
  if (!p.guided_by.empty()) op += " guided by " + p.guided_by;
  if (p.params.empty()) spdlog::info("{}: {}", spec.name, p.reason);
  return {std::move(p.params), std::move(op)};
}

proto::ProposeTask TargetSearch::agent_task(const Individual& parent, const Individual* second,
                                            const std::string& backend_name) const {
  const KernelSpec& tmpl = *backend->tunable;
  proto::ProposeTask task;
  task.target = spec.name;
  task.arch = population.arch();
  task.backend = backend_name;
  for (const Individual* ind : {&parent, second}) {
    if (!ind) continue;
    proto::ParentInfo info;
    info.candidate_id = ind->id;
    auto src = sources.find(ind->id);  // an agent's child has a source of its own
    info.source = src != sources.end() ? src->second : tmpl.source;
    info.params = ind->params;
    info.time_us = ind->median_us;
    if (auto b = bottleneck.find(ind->id); b != bottleneck.end()) info.bottleneck = b->second;
    if (auto m = metrics.find(ind->id); m != metrics.end()) info.metrics = m->second;
    task.parents.push_back(std::move(info));
  }
  task.count = 1;
  task.operator_hint = proposer ? proposer->tier_name(proposer->current_tier()) : "";
  task.failure_logs.assign(failure_notes.begin(), failure_notes.end());
  task.failed_children.assign(failed_for_agents.begin(), failed_for_agents.end());
  task.evaluated.assign(template_configs.begin(), template_configs.end());
  return task;
}

void TargetSearch::agent_asked() {
  failed_for_agents.clear();  // handed over once
  ++asking;
  ++in_flight;
}

bool TargetSearch::agent_may_ask(const std::string& parent_id) const {
  auto it = agent_dry.find(parent_id);
  if (it == agent_dry.end()) return true;
  return submitted.size() - it->second.at >=
         (size_t{1} << std::min<uint32_t>(it->second.empty, 30));
}

void TargetSearch::agent_answered_empty(const std::string& parent_id) {
  AgentDry& d = agent_dry[parent_id];
  ++d.empty;
  d.at = submitted.size();
}

void TargetSearch::agent_answered() {
  --asking;
  --in_flight;
}

bool TargetSearch::fits_template(const proto::ProposedCandidate& c) const {
  const KernelSpec& tmpl = *backend->tunable;
  // Every template parameter set and nothing else (the evaluator then uses the template's entry
  // point and launch geometry), and the constraints hold. Its source is the template's (built-in
  // agents) or its own (LLM agents).
  bool in_space =
      c.params.size() == tmpl.space.size() && c.source.size() <= (256u << 10) && !c.source.empty();
  for (const auto& [name, values] : tmpl.space) in_space = in_space && c.params.count(name) > 0;
  if (!in_space) return false;
  Result<bool> valid = eval::satisfies_constraints(tmpl, bench, dtype, c.params);
  return valid.is_ok() && *valid;
}

void TargetSearch::result_arrived(const proto::EvaluationResult& r) {
  --in_flight;
  ++report_.evaluations;
  if (!verified(r)) ++report_.failures;
  if (auto f = r.metrics.find("fraction_of_floor"); f != r.metrics.end()) {
    fraction_of_floor[r.candidate_id] = f->second;
  }
  if (!r.bottleneck.empty()) {
    bottleneck[r.candidate_id] = r.bottleneck;
    metrics[r.candidate_id] = r.metrics;  // with the prof.* counters behind the class
  }
}

void TargetSearch::crown(const Individual& best, const std::string& source) {
  report_.best_us = best.median_us;
  report_.best_id = best.id;
  report_.best_params = best.params;
  report_.best_source = source;
  report_.best_label = is_seed(best) ? "seed" : label_of(best.params, *backend->tunable);
  auto f = fraction_of_floor.find(best.id);
  report_.fraction_of_floor = f != fraction_of_floor.end() ? f->second : 0;
}

Judgement TargetSearch::judge_seed(const proto::EvaluationResult& r, const std::string& source) {
  if (!verified(r)) {
    finish(Phase::kFailed, "failed: the seed did not verify (" + proto::outcome_name(r.outcome) +
                               "): " + r.log.substr(0, 200));
    return {Verdict::kFailed, report_.state};
  }
  Individual seed;
  seed.id = r.candidate_id;
  seed.params = backend->seed.defines;
  seed.median_us = r.timing.median_us;
  seed.noise_rel = r.timing.noise_rel;
  seed.op = "seed";
  population.add_seed(seed);
  seed_verified = true;
  seed_id = seed.id;
  report_.seed_us = seed.median_us;
  crown(seed, source);
  if (proposer) {
    enter(Phase::kSearching);
  } else {
    finish(Phase::kConverged, "converged: no template to search");
  }
  return {Verdict::kBaseline, "the seed's time is the baseline", true};
}

Judgement TargetSearch::judge_child(const Individual& parent, const Individual& child,
                                    const std::string& source, const proto::EvaluationResult& r) {
  if (proposer) proposer->report(child.params, false);
  if (!r.metrics.empty()) metrics[child.id] = r.metrics;
  if (!verified(r)) {
    std::string detail = r.log;
    for (const proto::StageReport& s : r.stages) {
      if (!s.passed) detail += (detail.empty() ? "" : "\n") + s.name + ": " + s.detail;
    }
    if (detail.size() > 8000) {
      detail = detail.substr(0, 4000) + "\n...\n" + detail.substr(detail.size() - 4000);
    }
    failure_notes.push_back(child.op + ": " + proto::outcome_name(r.outcome) + ": " +
                            detail.substr(0, detail.find('\n')).substr(0, 200));
    while (failure_notes.size() > 4) failure_notes.pop_front();
    if (from_llm_agent(child.op)) {  // LLM children go back for repair
      failed_for_agents.push_back({child.id, child.parent_id, source, child.params,
                                   proto::outcome_name(r.outcome), detail});
      while (failed_for_agents.size() > 4) failed_for_agents.pop_front();
    }
    return {Verdict::kFailed, proto::outcome_name(r.outcome)};
  }
  Result<Decision> d = population.offer_child(parent, child);
  if (!d.is_ok()) {
    spdlog::warn("{}: {}", spec.name, d.status().to_string());
    return {Verdict::kReverted, d.status().message()};
  }
  if (d->keep) {
    ++report_.accepted;
    if (proposer) proposer->report(child.params, true);
  }
  spdlog::debug("{}: {} {} -> {}", spec.name, child.op, child.id.substr(0, 12), d->reason);
  return {d->keep ? Verdict::kKept : Verdict::kReverted, d->reason, d->keep, d->needs_retime};
}

Judgement TargetSearch::judge_retime(const Individual& candidate, const std::string& source,
                                     const proto::EvaluationResult& r) {
  // On failure the pending crown stays pending until a later one replaces it.
  if (!verified(r)) return {Verdict::kFailed, proto::outcome_name(r.outcome)};
  CrownStep c = population.confirm_crown(candidate.id, r.timing.median_us, r.timing.noise_rel);
  const bool crowned = c.state == CrownState::kCrowned && population.crowned();
  if (crowned) crown(*population.crowned(), source);
  return {crowned ? Verdict::kCrowned : Verdict::kCrownRejected, c.reason};
}

std::optional<Ending> TargetSearch::ending(const ConvergenceLimits& limits, double elapsed_s,
                                           bool budget_spent) const {
  if (done()) return std::nullopt;
  if (!seed_verified) {
    if (!budget_spent) return std::nullopt;
    return Ending{Phase::kStopped, "stopped: time budget spent before the seed was evaluated"};
  }
  ConvergenceState cs;
  cs.proposals_since_improvement = population.proposals_since_improvement();
  cs.best_us = report_.best_us;
  cs.seed_us = report_.seed_us;
  cs.floor_us = floor_us();
  cs.elapsed_s = elapsed_s;
  if (std::optional<std::string> why = convergence_reason(limits, cs)) {
    return Ending{Phase::kConverged, *why};
  }
  // The budget first: a target that stopped proposing because the budget was spent (exhausted
  // is set while its last tasks finish) did not run out of configurations.
  if (budget_spent) return Ending{Phase::kStopped, "stopped: time budget spent"};
  if (exhausted && in_flight == 0) {
    return Ending{Phase::kConverged,
                  "converged: every configuration near the parents was evaluated"};
  }
  return std::nullopt;
}

TargetShare TargetSearch::share(double weight) const {
  TargetShare s;
  s.target = spec.name;
  s.weight = weight;
  s.best_us = report_.best_us;
  s.seed_us = report_.seed_us;
  s.floor_us = floor_us();
  s.converged = exhausted;
  return s;
}

TargetStanding TargetSearch::standing() const {
  TargetStanding s;
  s.spec_hash = spec.spec_hash;
  s.best_id = report_.best_id;
  s.best_us = report_.best_us;
  if (seed_verified) {
    s.baseline_id = seed_id;
    s.baseline_us = report_.seed_us;
  }
  return s;
}

std::vector<std::pair<redis::PopulationKey, std::vector<std::pair<std::string, double>>>>
TargetSearch::population_members() const {
  std::vector<std::pair<redis::PopulationKey, std::vector<std::pair<std::string, double>>>> out;
  for (size_t i = 0; i < population.islands().size(); ++i) {
    std::vector<std::pair<std::string, double>> members;
    for (const Individual& e : population.island(i).elites())
      members.emplace_back(e.id, e.median_us);
    out.push_back({{spec.name, population.arch(), std::to_string(i)}, std::move(members)});
  }
  return out;
}

}  // namespace kiln::coordinator
