// The search loop of one run: per target and GPU model (EngineOptions::gpu_models), the seed is
// evaluated first (its time is the baseline), then the template's first valid configuration,
// then children the built-in proposer (or a connected agent) makes from parents the population
// selects; every verified child is judged against its parent (keep or revert), a new best is
// re-timed before it is crowned, and a target stops at its convergence limits. Evaluations go
// through the Dispatcher (so through Redis leases and the workers). What one target decides about
// its own search is in target_search.h; the engine sends the tasks, moves slots between targets
// (allocate_slots) and keeps the run going.
//
// Restart safety: with a Store, every change of the search state is also written to Redis as it
// happens (docs/run.md "Resuming a run"): the run's record (kiln:run, run_record.h), and per step
// one MULTI/EXEC holding an entry of the run's search log (kiln:events:{run}, search_log.h: submit,
// result, done) with the keys that change with it (kiln:cand:{id}, kiln:pop:{t}:{arch}:{island},
// kiln:target:{t}, kiln:src:{hash}). resume() rebuilds the state by replaying that log through the
// same code that wrote it, so the populations (counters included), seen sets, baselines, bests and
// reports come back as they were; then it folds in results that reached Redis after the last
// logged step, leaves tasks that hold a lease to Dispatcher::recover(), and sends again what was
// logged but never handed out.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "coordinator/dispatcher.h"
#include "coordinator/run_record.h"
#include "coordinator/search.h"
#include "coordinator/search_log.h"
#include "coordinator/shape_sweep.h"
#include "coordinator/target_report.h"
#include "coordinator/target_search.h"
#include "shared/redis_store.h"
#include "shared/target_spec.h"

namespace kiln::coordinator {

struct EngineOptions {
  std::string backend = "cpu";
  // The GPU models searched: each target has one population per model, fed only by evaluators
  // of that model (times of different GPUs never meet in one population). "" is one population
  // fed by any evaluator of the backend (the cpu backend; a farm of one GPU model).
  std::vector<std::string> gpu_models = {""};
  // Adds a model's populations when an evaluator of a model not yet searched connects (a farm
  // whose models are not known in advance: `kiln coordinator`).
  bool discover_gpu_models = false;
  // A shape sweep: each target named gets one population per shape (and GPU model), timed at
  // that shape; the others one at their benchmark shape.
  ShapeSweep shapes;
  // Transfer: a population of a sweep also tries the bests of its neighbours (the nearest
  // kTransferNeighbours shapes on its GPU model, the same shape on other models) before the
  // template's own order. false: every population starts cold (for the comparison).
  bool transfer = true;
  // A child is timed only until it is clearly slower than its parent (the fastest of its first
  // samples above kEarlyStopFactor x the parent's time: it could never be kept); seeds and
  // re-times are timed in full. false: every child in full (for comparing evaluation rates).
  bool early_stop = true;
  static constexpr double kEarlyStopFactor = 1.10;
  SearchParams search;
  ConvergenceLimits limits;
  std::chrono::seconds budget{0};   // whole run; 0: until every target converges
  // Once the budget is spent, how long evaluations already in flight are waited for before they
  // are abandoned (their targets stop, the run ends): the run ends at most this long after its
  // budget, even with every evaluator gone. 0: a tenth of the budget, at least 10 s and at most
  // 2 minutes.
  std::chrono::seconds budget_grace{0};
  uint32_t in_flight_per_target = 2;  // on average: allocate() moves slots between targets
  std::map<std::string, double> weights;  // share of end-to-end time per target (default equal)
  uint64_t seed = 1;
  std::string toolchain = "kiln";   // part of candidate ids
  // Proposal agents (`kiln agent`): while any is connected, up to this many of a target's
  // children at a time are asked of an agent instead of the in-process proposer (0: never ask).
  uint32_t agent_asks_per_target = 1;
  // Profiling (step 5): a new best is profiled when it is re-timed, and its bottleneck class
  // steers the built-in proposer's mutations of it (profile_guidance; off for the ablation).
  bool profile_new_bests = true;
  bool profile_guidance = true;
};

// How many of the nearest shapes on the same GPU model a population takes bests from.
inline constexpr size_t kTransferNeighbours = 3;

// What agents contributed, for the summary and tests.
struct AgentStats {
  uint64_t asked = 0;        // propose tasks sent
  uint64_t answered = 0;     // proposals with candidates
  uint64_t failed = 0;       // agent lost, timed out, or answered with an error
  uint64_t children = 0;     // candidates evaluated
  uint64_t duplicates = 0;   // candidates already seen (dropped before any GPU)
  uint64_t rejected = 0;     // candidates that are not a valid configuration of the template
};

class Engine {
 public:
  // `targets` must each have a kernel for options.backend. With a `store` (which must outlive the
  // engine) the search state is written to Redis as it changes; without one it lives in memory
  // only.
  Engine(std::vector<TargetSpec> targets, Dispatcher& dispatcher, EngineOptions options,
         redis::Store* store = nullptr);
  ~Engine();

  // A new run: writes its record (kiln:run) before anything is submitted. run() calls it when
  // neither begin() nor resume() was called. Needs a store.
  Status begin();

  // Continues the run recorded in the store after a coordinator restart (see the top of this
  // file): rebuilds every target's state from the run's search log, folds in results already in
  // Redis (they are not evaluated again), re-queues leased tasks with Dispatcher::recover() and
  // resends logged tasks that were never handed out, each judged as its original submission would
  // have been. The budget left is options.budget minus the time the run already spent.
  // NOT_FOUND when the store holds no run; FAILED_PRECONDITION naming the difference when the
  // recorded run is not this one (targets, their spec hashes, backend, toolchain, islands).
  // Of a finished run it rebuilds the state and queues nothing: finished() is then true.
  Status resume();

  // The run's record as this engine last wrote it (begin() or resume() first).
  const RunRecord& record() const { return record_; }

  // Whether every target has converged, stopped or failed (the run is over).
  bool finished() const;

  // Runs until every target has converged or failed, the budget is spent or `stop` is set;
  // `progress` is called about once a second and at the end.
  Status run(const std::atomic<bool>& stop,
             const std::function<void(const std::vector<TargetReport>&)>& progress);

  std::vector<TargetReport> reports() const;

  // How far the run went past its budget, in seconds of search time (0 within it or without one),
  // and how many evaluations in flight were abandoned when the grace period ran out.
  double overrun_s() const;
  uint64_t abandoned() const { return abandoned_; }
  // The grace period in effect (EngineOptions::budget_grace, or its default for the budget).
  std::chrono::seconds grace() const;

  // Every result received, in arrival order (for the output folder); after resume() also those
  // of the earlier coordinator processes of the run.
  const std::vector<proto::EvaluationResult>& results() const { return results_; }
  // What the engine made of a result: its target and GPU model, the candidate's parameters, the
  // task's kind (a re-time times a kept child again) and the verdict.
  struct ResultContext {
    std::string target;
    std::string gpu_model;
    std::string shape;  // the sweep's shape (shape_string); "" for the benchmark shape
    std::map<std::string, std::string> params;
    TaskKind kind = TaskKind::kChild;
    Verdict verdict = Verdict::kFailed;
    std::string source_sha256;  // of the kernel text evaluated
    // The candidate's lineage: its parent ("" for a seed), the operator that made it, the LLM
    // model that wrote it ("" when none did), and its island.
    std::string parent_id;
    std::string op;
    std::string model;
    uint32_t island = 0;
    double at_s = -1;  // the run's search time when the result arrived (-1: not recorded)
  };
  // nullptr for a task this run never sent (a late answer of an unknown task is not judged).
  const ResultContext* context_of(const std::string& task_id) const;

  // The search state of one target on one GPU model (at one shape of a sweep, as shape_string()
  // spells it), for tests and tools: nullptr / empty for an unknown unit.
  const Population* population(std::string_view target, std::string_view gpu_model = "",
                               std::string_view shape = "") const;
  // Candidate ids submitted for evaluation (the seen set), in submission order.
  std::vector<std::string> submitted(std::string_view target, std::string_view gpu_model = "",
                                     std::string_view shape = "") const;
  // The GPU models searched so far.
  const std::vector<std::string>& gpu_models() const { return record_models_; }
  // Tasks submitted and not yet answered.
  size_t pending() const { return pending_.size(); }
  const AgentStats& agent_stats() const { return agent_stats_; }
  // What each LLM model cost and gained, by model name: its calls, tokens and cost as the agents
  // reported them with their proposals to this process, and its children that were kept (over the
  // whole run: a resume replays those).
  struct LlmUse {
    uint64_t calls = 0;
    uint64_t input_tokens = 0;
    uint64_t output_tokens = 0;
    double cost_usd = 0;
    uint64_t accepted = 0;
  };
  const std::map<std::string, LlmUse>& llm_use() const { return llm_use_; }
  // Search seconds so far (over every coordinator process of the run).
  double search_seconds() const { return spent_s(); }

 private:
  struct Pending {
    size_t target = 0;
    TaskKind kind = TaskKind::kChild;
    Individual parent;   // kChild: the parent as it was; kRetime: the candidate re-timed
    Individual child;    // kChild: id, params, island, op; kRetime: unused
    std::string source;
    proto::EvaluateTask task;  // as sent (for a resume that must send it again)
    std::string model;         // the LLM model that wrote the child ("" when none did)
  };
  // Agents: a parent's child asked of an agent.
  struct Asked {
    size_t target = 0;
    Individual parent;
    uint32_t island = 0;
  };

  std::optional<size_t> target_index(std::string_view name, std::string_view gpu_model,
                                     std::string_view shape = "") const;
  // The template configurations of target t's population (at its shape).
  const std::vector<Params>& configs_of(size_t t) const;
  // Transfer: the best configuration of a neighbour of target t that t has not tried and that is
  // valid at its shape, with the neighbour's key; nullopt when there is none. Each neighbour's best
  // is considered once (TargetSearch::transfers_considered).
  std::optional<std::pair<Params, std::string>> transfer_child(size_t t);
  // Adds the populations of one GPU model (one per target) unless it has them; true when added.
  bool add_gpu_model(const std::string& model);
  // This run as this engine would record it (targets, spec hashes, options), without id or state.
  RunRecord this_run() const;

  void allocate();
  Status top_up(size_t t);
  Status on_result(const proto::EvaluationResult& r);
  void ask_agent(size_t t, const Individual& parent, const Individual* second, uint32_t island);
  Status on_proposal(const proto::Proposal& proposal);
  // Whether a task of this kind, for a candidate made by operator `op`, runs the seed's kernel
  // (else the template's).
  static bool runs_seed_kernel(TaskKind kind, const std::string& op);
  // The evaluation task of candidate `id` of `st` (without the profiling flag, which is per kind):
  // the seed's kernel or the template's.
  proto::EvaluateTask task_for(const TargetSearch& st, const std::string& task_id,
                               const std::string& id, const std::string& source,
                               const Params& params, bool seed_kernel) const;
  // Logs (with a store) and sends the task of candidate `id`; `p` carries kind, parent and child.
  Status submit(size_t t, Pending p, const std::string& source,
                const std::map<std::string, std::string>& params, const std::string& id);
  // A child of `parent` on `island` (operator `op`, written by LLM `model` or ""): recorded as
  // proposed (TargetSearch::child_proposed), then submitted.
  Status submit_child(size_t t, const Individual& parent, uint32_t island, const std::string& id,
                      const std::string& source, const Params& params, std::string op,
                      std::string model = "");
  void track(Pending p);  // counts a submitted task as pending
  // Forgets target t's tasks in flight (the grace period after the budget is over); how many.
  uint64_t abandon_in_flight(size_t t);
  Status mark_done(size_t t, const Ending& ending);
  // Writes one step of the search log with a store (nothing without one, or while replaying).
  Status write(const redis::SearchStep& step);
  // resume(): one logged step replayed; a source text by hash (read once).
  Status replay(const SearchEvent& event);
  Status replay_submit(const SubmitEvent& e);
  Result<std::string> source_of(const std::string& hash);
  Status save_progress();  // the time spent (and "finished") in kiln:run
  Status discover_gpu_models();  // populations for models of newly connected evaluators
  double spent_s() const;

  Dispatcher* dispatcher_;
  EngineOptions options_;
  std::vector<TargetSpec> specs_;           // every target, for the populations of a new model
  // Each target's template configurations that meet its constraints at the benchmark shape (or at
  // each shape of its sweep: keyed by unit_key(target, "", shape)), in the space's order (the
  // seed's children are drawn from them), listed once at construction.
  std::map<std::string, std::vector<Params>> configs_;
  std::vector<std::string> record_models_;  // GPU models with populations, in order added
  std::vector<std::unique_ptr<TargetSearch>> targets_;
  std::map<std::string, Pending> pending_;  // by task id
  std::vector<proto::EvaluationResult> results_;
  std::map<std::string, ResultContext> contexts_;  // by task id, for results_
  std::mt19937_64 rng_;
  std::chrono::steady_clock::time_point start_;
  uint64_t task_seq_ = 0;
  redis::Store* store_ = nullptr;
  RunRecord record_;
  bool begun_ = false;
  bool running_ = false;       // inside run(): spent_s() counts from start_
  double spent_before_ = 0;    // search time of the run before this run() call
  bool replaying_ = false;  // resume(): state changes only, nothing written or sent
  std::map<std::string, std::string> sources_;  // source text by hash, read back on resume
  std::set<std::string> sources_written_;       // hashes this process has put in kiln:src
  std::set<std::string> retimes_logged_;        // resume(): candidates whose re-time was logged
  std::map<std::string, Asked> asked_;          // propose tasks in flight, by task id
  uint64_t ask_seq_ = 0;
  AgentStats agent_stats_;
  std::map<std::string, LlmUse> llm_use_;
  double replay_at_s_ = -1;  // resume(): when the result being replayed arrived
  uint64_t abandoned_ = 0;  // evaluations in flight when the grace period after the budget ran out
};

}  // namespace kiln::coordinator
