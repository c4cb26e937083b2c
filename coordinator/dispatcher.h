// The coordinator's dispatch layer: workers, credits, leases and results, with no search policy.
// It binds the ROUTER, accepts evaluators (hello, heartbeats, credits), hands each queued
// `evaluate` task to a worker whose backends match -- and whose GPU model, when the task names
// one -- after writing the task's lease to Redis, and turns the answers into results for the
// search. What it guarantees, whatever fails:
// - no task is lost: a task whose worker goes silent, or whose lease expires, goes back to the
//   queue; after a coordinator restart recover() re-queues every lease found in Redis;
// - none is counted twice: a result is merged only while its task is in flight; a late or
//   duplicate answer is dropped (and counted), and results are written once in Redis;
// - none is forged: a result is merged only from the worker that holds the task's lease, and a
//   `verified` one only with every stage a verified result runs (proto::result_inconsistency);
//   anything else is refused and counted. A worker the dispatcher does not know is told so
//   (kErrorUnknownPeer) and announces itself again;
// - a misconfigured evaluator does not judge: its hello must name every target of the run with
//   the run's spec hash (else it is refused with what to do), and a result it marks worker_fault
//   sends the task to another evaluator, never blaming the candidate;
// - a task that was in flight on `max_kills` workers that died is quarantined as poison with the
//   reason, instead of killing the farm one worker at a time;
// - a malformed message gets an error reply naming the problem, and the loop goes on.
// Proposal tasks (`propose`) go to agents the same way, credit by credit, but hold no lease: a
// proposal is cheap to ask again, so one whose agent dies or that outlives `proposal_timeout`
// comes back from take_proposals() as a Proposal with `error` set, and the search asks elsewhere.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>
#include <zmq.hpp>

#include "coordinator/worker_sessions.h"
#include "shared/heartbeat.h"
#include "shared/log_rate.h"
#include "shared/protocol.h"
#include "shared/redis_store.h"
#include "shared/status.h"
#include "shared/transport.h"
#include "shared/zap_auth.h"

namespace kiln::coordinator {

struct DispatcherOptions {
  std::string bind = "tcp://127.0.0.1:*";
  net::HeartbeatPolicy heartbeat;
  // How long a worker may hold a task before it is handed to another (a hung evaluator that
  // still heartbeats); long enough for the slowest honest evaluation.
  std::chrono::milliseconds lease{std::chrono::minutes(10)};
  uint32_t max_kills = 3;  // workers a task may take down before it is quarantined
  // How long an agent may take over one `propose` task (an LLM call with its retries).
  std::chrono::milliseconds proposal_timeout{std::chrono::minutes(3)};
  std::string node = "coordinator";
  // The run's targets and their spec hashes: an evaluator whose hello lacks one or names another
  // hash is refused. Empty: no check (tests of the dispatch layer alone).
  std::map<std::string, std::string> spec_hashes;
  // The triton toolchain this run's candidate ids were made with (the coordinator's own Triton,
  // where it has one): a triton evaluator with another is refused. Empty: the first triton
  // evaluator sets it.
  std::string triton_toolchain;
  // CURVE (docs/security.md): the coordinator's keypair, and the worker keys it admits through its
  // ZAP handler. No secret key: no CURVE, and any peer that reaches `bind` may act as a worker.
  net::CurveServer curve;
  net::AllowList allowed;
  // Every population is of one GPU model (named, discovered, or the unnamed model of evaluators
  // that name none): a task goes only to evaluators that announced exactly its model. False: a
  // task that names no model goes to any evaluator of its backend (`--gpu-models any`).
  bool exact_gpu_models = false;
};

// A connected worker as its hello described it, with what it holds now (for /status).
struct WorkerView {
  std::string worker_id;
  std::string role;  // proto::kRoleEvaluator or kRoleAgent
  std::string node;
  std::string gpu_model;
  std::string arch;
  std::string version;
  std::vector<std::string> backends;
  uint32_t capacity = 0;
  uint32_t credits = 0;  // tasks it asked for and has not been given
  size_t in_flight = 0;  // tasks (evaluations or proposals) it holds
};

// A task given up on, with why.
struct Quarantined {
  proto::EvaluateTask task;
  std::string reason;
};

// Counters for progress lines and tests.
struct DispatchStats {
  uint64_t dispatched = 0;       // tasks sent (re-sends included)
  uint64_t results = 0;          // results merged
  uint64_t duplicates = 0;       // late or repeated results dropped
  uint64_t requeued = 0;         // tasks put back after a worker died or a lease expired
  uint64_t malformed = 0;        // messages that did not decode
  uint64_t workers_lost = 0;
  uint64_t proposals_sent = 0;     // propose tasks handed to agents
  uint64_t proposals = 0;          // proposals received in time
  uint64_t proposals_failed = 0;   // agent lost, timed out, or answered with an error
  uint64_t forged = 0;             // results refused: not from the lease holder, or not consistent
  uint64_t unknown_peers = 0;      // messages from peers that had not said hello (told to)
  uint64_t worker_faults = 0;      // results an evaluator marked worker_fault (task sent elsewhere)
  uint64_t refused_workers = 0;    // hellos refused (target specs differ from the run's)
};

class Dispatcher {
 public:
  // Binds the ROUTER. `store` must outlive the dispatcher.
  static Result<std::unique_ptr<Dispatcher>> create(zmq::context_t& context, redis::Store& store,
                                                    DispatcherOptions options);

  const std::string& endpoint() const { return router_.last_endpoint(); }

  // Queues a task (its task_id must be unique among queued and in-flight tasks: a second submit
  // of the same id is ignored and returns false). An `urgent` task goes ahead of every task
  // queued (the re-time of a new best: with many populations sharing a few GPUs, a re-time at
  // the back of the queue can wait past the budget and the best is never crowned).
  bool submit(proto::EvaluateTask task, bool urgent = false);

  // Queues a `propose` task for an agent. Same uniqueness rule as submit().
  bool submit_proposal(proto::ProposeTask task);

  // Proposals answered since the last call, and failed ones (error set: the agent was lost, the
  // task timed out, or the agent answered with an error), each exactly once per submitted task.
  std::vector<proto::Proposal> take_proposals();

  // After a restart: every lease in Redis becomes a queued task again (its worker, if alive, will
  // reconnect and answer; whichever answer comes first is merged). Returns how many.
  Result<size_t> recover();

  // One turn of the event loop: dispatches what was queued since the last turn, waits up to
  // timeout_ms for a message and handles every message already waiting, then dispatches again,
  // heartbeats, expires silent workers and stale leases.
  // Returns the results merged in this turn. Fails only when the socket or Redis is unusable.
  Result<std::vector<proto::EvaluationResult>> poll(int timeout_ms);

  // Says bye to every worker with `code` (proto::kByeFinished: the run is over and they exit;
  // kByeStopping: this coordinator stops, they wait for it to come back).
  void shutdown(std::string_view code, const std::string& reason);

  size_t queued() const { return queue_.size(); }
  size_t in_flight() const { return in_flight_.size(); }
  size_t workers() const { return workers_.size(); }
  size_t agents() const;                 // connected workers in the agent role
  // The GPU models of the connected evaluators of `backend` ("" for one that names none).
  std::set<std::string> evaluator_gpu_models(const std::string& backend) const;
  size_t proposals_pending() const { return proposal_queue_.size() + proposals_in_flight_.size(); }
  size_t proposals_queued() const { return proposal_queue_.size(); }
  size_t proposals_in_flight() const { return proposals_in_flight_.size(); }
  // Every connected worker, in routing-id order.
  std::vector<WorkerView> worker_views() const;
  const std::vector<Quarantined>& quarantined() const { return quarantined_; }
  const DispatchStats& stats() const { return stats_; }
  // Handshakes admitted and refused by the ZAP handler (all zero without CURVE).
  net::AuthCounters auth_counters() const {
    return auth_ ? auth_->counters() : net::AuthCounters{};
  }

 private:
  struct Worker {
    proto::Hello hello;
    std::string key_name;  // the CURVE key it connected with (its ZAP user id); "" without CURVE
    uint32_t credits = 0;
    std::set<std::string> tasks;  // task ids in flight on this worker
  };
  struct ProposalFlight {
    proto::ProposeTask task;
    std::string peer;
    std::chrono::steady_clock::time_point deadline;
  };
  struct Flight {
    proto::EvaluateTask task;
    std::string peer;
    std::chrono::steady_clock::time_point deadline;
  };

  Dispatcher(redis::Store& store, DispatcherOptions options,
             std::unique_ptr<net::ZapAuthenticator> auth, net::RouterSocket router);

  Status handle(const std::string& peer, std::string_view payload, const std::string& key_name);
  Result<bool> on_result(const std::string& peer, proto::EvaluationResult result);
  Status dispatch();
  void send(const std::string& peer, proto::Message body);
  void requeue(const std::string& task_id, const std::string& why, bool worker_died);
  void fail_proposal(const std::string& task_id, const std::string& why);
  void on_proposal(const std::string& peer, proto::Proposal proposal);
  // Requeues the worker's tasks, fails the proposals it was asked for, and forgets it.
  void drop_worker(const std::string& peer, const std::string& why, bool died);
  void on_hello(const std::string& peer, const proto::Hello& hello, const std::string& key_name);
  // Refuses `hello` when its process shares its worker id with another live one (WorkerSessions);
  // true when it did.
  bool refuse_shared_id(const std::string& peer, const proto::Hello& hello);
  // Sends `refused` with `why` to the process of `hello`'s session (another process that shares
  // the routing id ignores it); the process stops.
  void refuse_session(const std::string& peer, const proto::Hello& hello, const std::string& why);
  // Why an evaluator's targets differ from the run's (empty when they match or are not checked).
  std::string spec_mismatch(const proto::Hello& hello) const;
  // Why a triton evaluator's toolchain cannot join the run's (triton_toolchain_), or "".
  std::string toolchain_mismatch(const proto::Hello& hello);
  // A result the lease holder marked worker_fault: the task goes to another evaluator.
  void on_worker_fault(Flight flight, const proto::EvaluationResult& result);
  // Gives up on a task with `reason` (its lease released); it stays in quarantined().
  void quarantine(proto::EvaluateTask task, std::string reason);
  // A task taken back from a worker, first in line again.
  void put_back(proto::EvaluateTask task);

  redis::Store* store_;
  DispatcherOptions options_;
  std::unique_ptr<net::ZapAuthenticator> auth_;  // declared before router_: outlives it
  net::RouterSocket router_;
  net::PeerTable peers_;
  proto::IdGenerator ids_;
  // The run's triton toolchain: options_.triton_toolchain, else the first triton evaluator's.
  std::string triton_toolchain_;
  std::map<std::string, Worker> workers_;      // by routing id
  WorkerSessions sessions_;                    // which process speaks for each worker id
  std::deque<proto::EvaluateTask> queue_;
  std::set<std::string> queued_ids_;          // task ids in queue_
  std::map<std::string, Flight> in_flight_;    // by task id
  std::map<std::string, uint32_t> kills_;      // task id -> workers lost while holding it
  std::map<std::string, std::set<std::string>>
      faulted_;                                  // task id -> worker ids that could not run it
  std::vector<proto::EvaluationResult> merged_;  // this turn's results
  std::vector<Quarantined> quarantined_;
  std::deque<ProposalFlight> proposal_queue_;  // peer empty; deadline counts from submit
  std::map<std::string, ProposalFlight> proposals_in_flight_;  // by task id
  std::set<std::string> proposal_ids_;          // every proposal task id queued or in flight
  std::vector<proto::Proposal> proposals_;      // answered or failed, not yet taken
  DispatchStats stats_;
  // What peers can repeat without bound (garbage, forged or late results, messages without a
  // hello) is logged at most 10 lines per kind in 10 s, then "suppressed N similar messages".
  LogRateLimiter noisy_{10, std::chrono::seconds(10)};
};

}  // namespace kiln::coordinator
