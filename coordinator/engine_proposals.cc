// Where a population's children come from besides the in-process proposer: the bests of its
// neighbours in a shape sweep (transfer) and proposal agents (ask_agent, on_proposal); see
// engine.h and docs/agent.md.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>

#include "coordinator/engine.h"

namespace kiln::coordinator {

std::optional<std::pair<Params, std::string>> Engine::transfer_child(size_t t) {
  TargetSearch& st = *targets_[t];
  if (!options_.transfer || st.shape.empty() || !st.backend || !st.backend->tunable) {
    return std::nullopt;
  }
  // Neighbours: the nearest shapes on this GPU model, then this shape on the other models.
  std::vector<std::pair<double, size_t>> near, across;
  for (size_t u = 0; u < targets_.size(); ++u) {
    const TargetSearch& other = *targets_[u];
    if (u == t || other.spec.name != st.spec.name || other.report().best_params.empty()) continue;
    if (other.gpu_model == st.gpu_model) {
      near.emplace_back(shape_distance(st.bench, other.bench), u);
    } else if (other.shape == st.shape) {
      across.emplace_back(0, u);
    }
  }
  std::sort(near.begin(), near.end());
  if (near.size() > kTransferNeighbours) near.resize(kTransferNeighbours);
  near.insert(near.end(), across.begin(), across.end());
  const KernelSpec& tmpl = *st.backend->tunable;
  const std::vector<Params>& valid = configs_of(t);
  for (const auto& [distance, u] : near) {
    const TargetReport& best = targets_[u]->report();
    if (!st.transfers_considered.insert(targets_[u]->key + " " + best.best_id).second) continue;
    if (!best.best_source.empty() && best.best_source != tmpl.source)
      continue;  // an agent's own text
    if (std::find(valid.begin(), valid.end(), best.best_params) == valid.end()) continue;
    if (st.seen.contains(st.candidate_id_of(tmpl.source, best.best_params, options_.toolchain)))
      continue;
    return std::make_pair(best.best_params, targets_[u]->key);
  }
  return std::nullopt;
}

void Engine::ask_agent(size_t t, const Individual& parent, const Individual* second,
                       uint32_t island) {
  TargetSearch& st = *targets_[t];
  proto::ProposeTask task = st.agent_task(parent, second, options_.backend);
  task.task_id = "p" + std::to_string(++ask_seq_) + "-" + st.spec.name;
  if (!dispatcher_->submit_proposal(task)) return;
  asked_[task.task_id] = {t, parent, island};
  st.agent_asked();
  ++agent_stats_.asked;
}

Status Engine::on_proposal(const proto::Proposal& proposal) {
  auto it = asked_.find(proposal.task_id);
  if (it == asked_.end()) return Status::ok();
  Asked asked = std::move(it->second);
  asked_.erase(it);
  TargetSearch& st = *targets_[asked.target];
  st.agent_answered();
  for (const proto::ModelUsage& u : proposal.usage) {  // spent whether or not it yielded a kernel
    LlmUse& use = llm_use_[u.model];
    use.calls += u.calls;
    use.input_tokens += u.input_tokens;
    use.output_tokens += u.output_tokens;
    if (std::isfinite(u.cost_usd) && u.cost_usd > 0) use.cost_usd += u.cost_usd;
  }
  if (!proposal.error.empty() || proposal.candidates.empty()) {
    ++agent_stats_.failed;
    st.agent_answered_empty(asked.parent.id);
    spdlog::info("{}: agent proposal {}: {}", st.spec.name, proposal.task_id,
                 proposal.error.empty() ? "no candidates" : proposal.error);
    return Status::ok();
  }
  ++agent_stats_.answered;
  if (st.done()) return Status::ok();
  const uint64_t children_before = agent_stats_.children;
  for (const proto::ProposedCandidate& c : proposal.candidates) {
    if (!st.fits_template(c)) {
      ++agent_stats_.rejected;
      spdlog::info("{}: agent candidate rejected: not a valid configuration of the template",
                   st.spec.name);
      continue;
    }
    const std::string id = st.candidate_id_of(c.source, c.params, options_.toolchain);
    if (st.seen.contains(id)) {
      ++agent_stats_.duplicates;
      continue;
    }
    ++agent_stats_.children;
    KILN_RETURN_IF_ERROR(submit_child(asked.target, asked.parent, asked.island, id, c.source,
                                      c.params, agent_operator(c.operator_name), c.model));
  }
  if (agent_stats_.children == children_before) st.agent_answered_empty(asked.parent.id);
  return Status::ok();
}

}  // namespace kiln::coordinator
