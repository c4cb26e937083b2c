// One target's search on one GPU model, as the engine drives it: its population, proposer and
// seen set, its phase (starting, evaluating the seed, searching, then converged, stopped or
// failed) with the report shown for it, and the judgements of its results: the seed's time is
// the baseline, a child is kept or reverted against its parent, a re-timed best is crowned or
// not. The engine (engine.h) sends the tasks, writes the search log and moves slots between
// targets; what a target decides about its own search is here.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "agent/builtin_proposer.h"
#include "coordinator/search.h"
#include "coordinator/search_log.h"
#include "coordinator/target_report.h"
#include "shared/protocol.h"
#include "shared/redis_store.h"
#include "shared/target_spec.h"

namespace kiln::coordinator {

using Params = std::map<std::string, std::string>;

// The operator recorded for an agent's child: "agent " and the agent's own operator name
// ("agent llm rewrite", "agent mutate"; "agent proposal" when it gave none).
std::string agent_operator(const std::string& agent_op);
// Whether `op` (as agent_operator() made it) names a child of an LLM agent (agent/llm names its
// operators "llm ..."): such a child's failure goes back to the agents for repair.
bool from_llm_agent(const std::string& op);

// How a result was judged, for the search log.
struct Judgement {
  Verdict verdict = Verdict::kFailed;
  std::string reason;
  bool islands_changed = false;  // the population's islands changed (their members are logged)
  bool needs_retime = false;     // a kept child that would be the new best: re-time it
};

// A final phase and the state shown for it ("converged: no improvement in 64 proposals").
struct Ending {
  Phase phase = Phase::kConverged;
  std::string state;
};

class TargetSearch {
 public:
  // `backend_name`: the backend searched ("cpu", "cuda"); a target without kernels for it starts
  // failed.
  // `shape`: the shape of a sweep it is searched at (fitness there; its tasks name it), or
  // nullopt for the backend's benchmark shape.
  TargetSearch(TargetSpec spec, std::string gpu_model, const std::string& backend_name,
               const SearchParams& params, std::optional<Shape> shape = std::nullopt);
  TargetSearch(const TargetSearch&) = delete;
  TargetSearch& operator=(const TargetSearch&) = delete;

  Phase phase() const { return phase_; }
  bool done() const { return is_final(phase_); }
  const TargetReport& report() const { return report_; }
  // Ends the search: `state` is what is shown, and begins with phase_name(final_phase).
  void finish(Phase final_phase, std::string state);

  // This target's candidate id of a kernel (the id names the GPU model when the population has
  // one).
  std::string candidate_id_of(const std::string& source, const Params& params,
                              const std::string& toolchain) const;
  bool is_seed(const Individual& ind) const { return seed_verified && ind.id == seed_id; }
  // The physical floor at the benchmark shape, from the best's measured fraction of it; 0 when
  // unknown (the cpu backend measures none).
  double floor_us() const;

  // Proposals. The seed's task was sent: it is seen, and its time is awaited.
  void seed_sent(const std::string& id, const std::string& source);
  // A child's task is about to be sent: it is seen (with its source when that is its own; its
  // configuration, when it is the template's, for agents to avoid) and counts as a proposal from
  // its parent.
  void child_proposed(const std::string& id, const std::string& source, const Params& params,
                      uint32_t island, const std::string& parent_id);
  // A child of the seed: the first template configuration not seen yet (in the space's order),
  // then random ones of the next 64; nullopt when every configuration was seen. `configs`: the
  // template's valid configurations.
  std::optional<Params> template_child(const std::vector<Params>& configs,
                                       const std::string& toolchain, std::mt19937_64& rng) const;
  // Now and then a second parent for a crossover: another elite of `island`, never the seed.
  const Individual* second_parent(size_t island, const Individual& parent,
                                  std::mt19937_64& rng) const;
  // A child of the built-in proposer (empty params when it finds none near the parents), with the
  // operator recorded for it; steered by the parent's bottleneck class when `guidance`.
  std::pair<Params, std::string> builtin_child(const Individual& parent, const Individual* second,
                                               bool guidance, const std::string& toolchain,
                                               std::mt19937_64& rng);
  // A propose task for an agent (its task id is the caller's), and the bookkeeping once sent.
  proto::ProposeTask agent_task(const Individual& parent, const Individual* second,
                                const std::string& backend_name) const;
  void agent_asked();
  void agent_answered();
  // Answers about a parent that brought no new child back off asking about it: after the n-th such
  // answer, agents are asked about that parent again only once 2^n more candidates were sent for
  // evaluation. An agent with nothing new around a parent is not asked again at once, over and
  // over, while the search waits on its evaluations; a model that failed for a while (rate limits,
  // time-outs) is still asked again as the search goes on.
  bool agent_may_ask(const std::string& parent_id) const;
  void agent_answered_empty(const std::string& parent_id);
  // Whether an agent's candidate keeps the template's contract: every template parameter set
  // and nothing else, the constraints hold, a source of its own at most 256 KiB.
  bool fits_template(const proto::ProposedCandidate& c) const;

  // Results. Counts it and keeps its measurements (floor fraction, profile); every result goes
  // through here before it is judged.
  void result_arrived(const proto::EvaluationResult& r);
  // The seed's result: its time is the baseline (or the target failed).
  Judgement judge_seed(const proto::EvaluationResult& r, const std::string& source);
  // A child's result, against `parent` as it was when the child was proposed. `child` carries
  // the result's time.
  Judgement judge_child(const Individual& parent, const Individual& child,
                        const std::string& source, const proto::EvaluationResult& r);
  // A re-time of `candidate`, the pending best: crowned or not.
  Judgement judge_retime(const Individual& candidate, const std::string& source,
                         const proto::EvaluationResult& r);

  // Why the search should end now (a convergence limit, the budget, nothing left to propose),
  // or nullopt. Before the seed verified, only a spent budget ends it.
  std::optional<Ending> ending(const ConvergenceLimits& limits, double elapsed_s,
                               bool budget_spent) const;
  // The target's share for allocate_slots().
  TargetShare share(double weight) const;

  // For the search log: the standing recorded with each result, and every island's members.
  TargetStanding standing() const;
  std::vector<std::pair<redis::PopulationKey, std::vector<std::pair<std::string, double>>>>
  population_members() const;

  const TargetSpec spec;
  const std::string gpu_model;  // "" for any evaluator of the backend
  const std::string shape;      // the sweep's shape as shape_string() spells it; "" for none
  const std::string key;        // unit_key(spec.name, gpu_model, shape)
  const BackendSpec* backend = nullptr;
  Shape bench;  // the shape timed: the sweep's, else the backend's benchmark shape
  DType dtype = DType::kF32;
  Population population;
  std::unique_ptr<agent::BuiltinProposer> proposer;
  SeenSet seen;
  // The template configurations proposed, oldest first, the latest kMaxEvaluatedSent of them
  // (ProposeTask.evaluated).
  std::deque<Params> template_configs;
  std::map<std::string, double> fraction_of_floor;  // by candidate id
  std::map<std::string, std::string> sources;       // by candidate id (seed, agents' own)
  bool seed_verified = false;
  std::string seed_id;     // the baseline's candidate id, once verified
  bool exhausted = false;  // nothing more is proposed (its last tasks may still be out)
  uint32_t in_flight = 0;
  uint32_t asking = 0;  // propose tasks at agents (counted in in_flight too)
  struct AgentDry {
    uint32_t empty = 0;  // answers without a new child
    size_t at = 0;       // submitted.size() at the last of them
  };
  std::map<std::string, AgentDry> agent_dry;  // by parent id
  // Agents' children that failed, handed back in the next propose task for repair (bounded), and
  // one-line notes on recent failures of any child for the prompts.
  std::deque<proto::FailedChild> failed_for_agents;
  std::deque<std::string> failure_notes;
  std::map<std::string, std::map<std::string, double>> metrics;  // by candidate id (profiles)
  std::map<std::string, std::string> bottleneck;  // by candidate id: its profile's class
  uint32_t slots = 1;  // evaluations it may have queued or running (Engine::allocate)
  uint32_t next_island = 0;
  std::vector<std::string> submitted;  // candidate ids sent for evaluation, in order
  // Neighbours' bests already considered for transfer ("<key> <best id>"; Engine::transfer_child).
  std::set<std::string> transfers_considered;

 private:
  void enter(Phase phase);  // a phase that is not final
  void crown(const Individual& best, const std::string& source);

  const std::string id_backend_;  // the backend as candidate ids name it
  Phase phase_ = Phase::kStarting;
  TargetReport report_;
};

}  // namespace kiln::coordinator
