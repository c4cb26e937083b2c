// Dispatcher: see dispatcher.h. One thread; every state change that must survive a crash (a task
// handed out, a result) goes to Redis before the message that depends on it leaves.
#include "coordinator/dispatcher.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <limits>
#include <utility>

#include "coordinator/target_report.h"
#include "shared/log_rate.h"
#include "shared/redis_keys.h"
#include "shared/target_spec.h"
#include "shared/text.h"

namespace kiln::coordinator {
namespace {

using Clock = std::chrono::steady_clock;

int64_t epoch_ms(Clock::time_point t) {
  // Leases in Redis carry wall-clock deadlines, so another coordinator process can read them.
  const auto wall = std::chrono::system_clock::now() + (t - Clock::now());
  return std::chrono::duration_cast<std::chrono::milliseconds>(wall.time_since_epoch()).count();
}

// An evaluator takes a task of one of its backends, and of its GPU model: the very model the task
// names when `exact` (every population is of one model, the unnamed one included), else when the
// task names one.
bool serves(const proto::Hello& worker, const proto::EvaluateTask& task, bool exact) {
  return worker.role == proto::kRoleEvaluator &&
         std::find(worker.backends.begin(), worker.backends.end(), task.backend) !=
             worker.backends.end() &&
         (task.gpu_model == worker.gpu_model || (!exact && task.gpu_model.empty()));
}

// An agent takes proposal tasks for its backends (an agent that names none takes any).
bool serves(const proto::Hello& worker, const proto::ProposeTask& task) {
  return worker.role == proto::kRoleAgent &&
         (worker.backends.empty() ||
          std::find(worker.backends.begin(), worker.backends.end(), task.backend) != worker.backends.end());
}

}  // namespace

Result<std::unique_ptr<Dispatcher>> Dispatcher::create(zmq::context_t& context, redis::Store& store,
                                                       DispatcherOptions options) {
  net::SocketOptions so;
  std::unique_ptr<net::ZapAuthenticator> auth;
  if (options.curve.enabled()) {  // the handler serves before the first handshake can happen
    KILN_ASSIGN_OR_RETURN(auth, net::ZapAuthenticator::start(context, options.allowed));
  }
  KILN_ASSIGN_OR_RETURN(net::RouterSocket router,
                        net::RouterSocket::bind(context, options.bind, so, options.curve));
  if (auth) {
    KILN_RETURN_IF_ERROR(auth->watch(router.handle()));
    spdlog::info("CURVE on {}: admitting {} worker key(s) from {}", router.last_endpoint(),
                 auth->allowed_keys(), options.allowed.source);
  }
  return std::unique_ptr<Dispatcher>(
      new Dispatcher(store, std::move(options), std::move(auth), std::move(router)));
}

Dispatcher::Dispatcher(redis::Store& store, DispatcherOptions options,
                       std::unique_ptr<net::ZapAuthenticator> auth, net::RouterSocket router)
    : store_(&store),
      options_(std::move(options)),
      auth_(std::move(auth)),
      router_(std::move(router)),
      peers_(options_.heartbeat),
      ids_(options_.node),
      triton_toolchain_(options_.triton_toolchain) {}

bool Dispatcher::submit(proto::EvaluateTask task, bool urgent) {
  if (in_flight_.count(task.task_id) || !queued_ids_.insert(task.task_id).second) return false;
  if (urgent)
    queue_.push_front(std::move(task));
  else
    queue_.push_back(std::move(task));
  return true;
}

Result<size_t> Dispatcher::recover() {
  // Every lease, whatever its deadline (expired_leases stops at 1,000 by default).
  constexpr int64_t kAll = std::numeric_limits<int64_t>::max();
  KILN_ASSIGN_OR_RETURN(std::vector<std::string> leased,
                        store_->expired_leases(kAll, static_cast<size_t>(kAll)));
  size_t n = 0;
  for (const auto& id : leased) {
    KILN_ASSIGN_OR_RETURN(std::optional<std::string> payload, store_->lease_payload(id));
    Result<proto::Envelope> env = payload ? proto::decode(*payload) : Result<proto::Envelope>(not_found(id));
    auto* task = env.is_ok() ? std::get_if<proto::EvaluateTask>(&env->body) : nullptr;
    if (!task) {
      spdlog::warn("lease {} holds no readable task; dropping it", id);
      KILN_RETURN_IF_ERROR(store_->release_lease(id));
      continue;
    }
    if (submit(std::move(*task))) ++n;
  }
  return n;
}

void Dispatcher::send(const std::string& peer, proto::Message body) {
  Status s = router_.send(peer, proto::encode({proto::kProtocolVersion, ids_.next(), std::move(body)}));
  if (!s.is_ok()) spdlog::debug("send to {}: {}", peer, s.to_string());
  peers_.mark_sent(peer, Clock::now());
}

bool Dispatcher::submit_proposal(proto::ProposeTask task) {
  if (task.task_id.empty() || !proposal_ids_.insert(task.task_id).second) return false;
  proposal_queue_.push_back({std::move(task), "", Clock::now() + options_.proposal_timeout});
  return true;
}

std::vector<proto::Proposal> Dispatcher::take_proposals() { return std::exchange(proposals_, {}); }

size_t Dispatcher::agents() const {
  return std::count_if(workers_.begin(), workers_.end(),
                       [](const auto& w) { return w.second.hello.role == proto::kRoleAgent; });
}

std::set<std::string> Dispatcher::evaluator_gpu_models(const std::string& backend) const {
  std::set<std::string> models;
  for (const auto& [peer, w] : workers_) {
    const proto::Hello& h = w.hello;
    if (h.role == proto::kRoleEvaluator &&
        std::find(h.backends.begin(), h.backends.end(), backend) != h.backends.end()) {
      models.insert(h.gpu_model);
    }
  }
  return models;
}

void Dispatcher::fail_proposal(const std::string& task_id, const std::string& why) {
  proto::Proposal failed;
  failed.task_id = task_id;
  failed.error = why;
  if (auto it = proposals_in_flight_.find(task_id); it != proposals_in_flight_.end()) {
    failed.target = it->second.task.target;
    proposals_in_flight_.erase(it);
  } else {
    auto q = std::find_if(proposal_queue_.begin(), proposal_queue_.end(),
                          [&](const ProposalFlight& f) { return f.task.task_id == task_id; });
    if (q == proposal_queue_.end()) return;
    failed.target = q->task.target;
    proposal_queue_.erase(q);
  }
  spdlog::warn("proposal task {} for {} failed: {}", log_safe(task_id), log_safe(failed.target), log_safe(why, 400));
  proposal_ids_.erase(task_id);
  ++stats_.proposals_failed;
  proposals_.push_back(std::move(failed));
}

void Dispatcher::on_proposal(const std::string& peer, proto::Proposal proposal) {
  auto it = proposals_in_flight_.find(proposal.task_id);
  if (it == proposals_in_flight_.end() || it->second.peer != peer) {
    ++stats_.duplicates;
    spdlog::info("dropping a proposal for task {} from {}: not in flight there", log_safe(proposal.task_id), log_safe(peer));
    return;
  }
  if (proposal.target.empty()) proposal.target = it->second.task.target;
  if (proposal.target != it->second.task.target) {
    fail_proposal(proposal.task_id, "the agent answered for target '" + proposal.target + "', not '" +
                                        it->second.task.target + "'");
    return;
  }
  proposals_in_flight_.erase(it);
  proposal_ids_.erase(proposal.task_id);
  if (proposal.error.empty()) ++stats_.proposals;
  else ++stats_.proposals_failed;
  proposals_.push_back(std::move(proposal));
}

void Dispatcher::drop_worker(const std::string& peer, const std::string& why, bool died) {
  auto w = workers_.find(peer);
  if (w != workers_.end()) {
    std::vector<std::string> held(w->second.tasks.begin(), w->second.tasks.end());
    for (const auto& t : held) requeue(t, why, died);
  }
  std::vector<std::string> asked;
  for (const auto& [id, f] : proposals_in_flight_) {
    if (f.peer == peer) asked.push_back(id);
  }
  for (const auto& id : asked) fail_proposal(id, why);
  workers_.erase(peer);
  peers_.remove(peer);
}

void Dispatcher::requeue(const std::string& task_id, const std::string& why, bool worker_died) {
  auto it = in_flight_.find(task_id);
  if (it == in_flight_.end()) return;
  Flight f = std::move(it->second);
  in_flight_.erase(it);
  if (auto w = workers_.find(f.peer); w != workers_.end()) w->second.tasks.erase(task_id);
  const uint32_t kills = worker_died ? ++kills_[task_id] : kills_[task_id];
  if (kills >= options_.max_kills) {
    quarantine(std::move(f.task), "quarantined as poison: " + std::to_string(kills) +
                                      " workers were lost while evaluating it (last: " + why + ")");
    return;
  }
  spdlog::warn("task {} back in the queue: {}", task_id, why);
  put_back(std::move(f.task));
}

void Dispatcher::quarantine(proto::EvaluateTask task, std::string reason) {
  spdlog::error("task {} (candidate {}): {}", task.task_id, task.candidate_id, reason);
  Status released = store_->release_lease(task.task_id);
  if (!released.is_ok()) spdlog::warn("releasing lease {}: {}", task.task_id, released.to_string());
  kills_.erase(task.task_id);
  faulted_.erase(task.task_id);
  quarantined_.push_back({std::move(task), std::move(reason)});
}

void Dispatcher::put_back(proto::EvaluateTask task) {
  ++stats_.requeued;
  queued_ids_.insert(task.task_id);
  queue_.push_front(std::move(task));  // first in line: it has waited longest
}

Result<bool> Dispatcher::on_result(const std::string& peer, proto::EvaluationResult result) {
  auto it = in_flight_.find(result.task_id);
  if (it == in_flight_.end() || it->second.task.candidate_id != result.candidate_id) {
    ++stats_.duplicates;  // late (already answered or requeued and answered) or unknown
    log_limited(noisy_, spdlog::level::info, "late result",
                fmt::format("dropping a result for task {} from {}: not in flight",
                            log_safe(result.task_id), log_safe(peer)));
    return false;
  }
  if (it->second.peer != peer) {
    // Only the lease holder answers a task: anyone else is late (the task was taken from it and
    // handed out again) or forging; its answer must not crowd out the holder's.
    ++stats_.forged;
    log_limited(
        noisy_, spdlog::level::warn, "result from another worker",
        fmt::format("refusing a result for task {} from {}: the task is leased to another worker",
                    log_safe(result.task_id), log_safe(peer)));
    return false;
  }
  if (std::string why = proto::result_inconsistency(result); !why.empty()) {
    ++stats_.forged;
    log_limited(noisy_, spdlog::level::warn, "inconsistent result",
                fmt::format("refusing a result for task {} from {}: {}", log_safe(result.task_id),
                            log_safe(peer), why));
    requeue(result.task_id, "its worker sent an inconsistent result (" + why + ")", false);
    return false;
  }
  // A task of a shape sweep is timed at its shape: an evaluator that does not echo it (a kiln from
  // before sweeps, which times at the benchmark shape) has not evaluated what was asked.
  const std::map<std::string, int64_t>& shape = it->second.task.shape;
  if (!shape.empty() && result.outcome == proto::Outcome::kVerified && result.shape != shape) {
    result.worker_fault = true;
    result.log = "it timed at another shape than the task's " + shape_string(shape) +
                 " (a kiln without shape sweeps? update it)";
  }
  if (result.worker_fault) {
    Flight f = std::move(it->second);
    in_flight_.erase(it);
    on_worker_fault(std::move(f), result);
    return false;
  }
  // Where it came from, from what the coordinator knows rather than what the worker says.
  result.unit = unit_key(it->second.task.target, it->second.task.gpu_model,
                         shape.empty() ? "" : shape_string(shape));
  if (auto w = workers_.find(peer); w != workers_.end()) {
    result.evaluator = w->second.hello.worker_id;
    result.evaluator_gpu_model = w->second.hello.gpu_model;
  }
  // The worker names its arch; a name that cannot be part of a key is stored made safe, never
  // refused (the result is good, only its label is odd).
  const std::string arch = result.arch.empty() ? "unknown" : redis::keys::safe_key_component(result.arch);
  Status put = store_->put_result_once(result.candidate_id, arch,
                                       proto::encode({proto::kProtocolVersion, result.task_id, result}));
  if (!put.is_ok() && put.code() != StatusCode::kAlreadyExists) return put;
  KILN_RETURN_IF_ERROR(store_->release_lease(result.task_id));
  if (auto w = workers_.find(it->second.peer); w != workers_.end()) w->second.tasks.erase(result.task_id);
  in_flight_.erase(it);
  kills_.erase(result.task_id);
  faulted_.erase(result.task_id);
  ++stats_.results;
  merged_.push_back(std::move(result));
  return true;
}

void Dispatcher::on_worker_fault(Flight f, const proto::EvaluationResult& result) {
  ++stats_.worker_faults;
  auto w = workers_.find(f.peer);
  const std::string worker_id = w != workers_.end() ? w->second.hello.worker_id : f.peer;
  if (w != workers_.end()) w->second.tasks.erase(f.task.task_id);
  std::set<std::string>& tried = faulted_[f.task.task_id];
  tried.insert(worker_id);
  spdlog::warn("evaluator {} could not evaluate task {}: {}; the task goes to another evaluator",
               log_safe(worker_id), log_safe(f.task.task_id), log_safe(result.log, 400));
  if (tried.size() >= options_.max_kills) {
    quarantine(std::move(f.task),
               "quarantined: " + std::to_string(tried.size()) +
                   " evaluators could not evaluate it (last: " + log_safe(result.log, 400) + ")");
    return;
  }
  put_back(std::move(f.task));
}

std::string Dispatcher::toolchain_mismatch(const proto::Hello& hello) {
  // Triton's cubins depend on its version and on kiln's compile worker: a candidate id names one
  // kernel only while every evaluator of the run compiles it alike. The coordinator's own Triton
  // sets the run's toolchain, else the first triton evaluator (per coordinator process).
  if (hello.role != proto::kRoleEvaluator || hello.toolchain.empty() ||
      std::find(hello.backends.begin(), hello.backends.end(), "triton") == hello.backends.end()) {
    return "";
  }
  if (triton_toolchain_.empty()) triton_toolchain_ = hello.toolchain;
  if (hello.toolchain == triton_toolchain_) return "";
  return "it compiles Triton kernels with " + log_safe(hello.toolchain, 80) +
         ", and this run's triton evaluators with " + triton_toolchain_ +
         ": the same candidate would be two kernels. Give it the same Triton (KILN_TRITON_PYTHON "
         "naming a python that has that version; `kiln version` shows a node's) and the same kiln";
}

std::string Dispatcher::spec_mismatch(const proto::Hello& hello) const {
  if (hello.role != proto::kRoleEvaluator) return "";
  std::string problems;
  for (const auto& [target, hash] : options_.spec_hashes) {
    auto it = hello.spec_hashes.find(target);
    std::string problem;
    if (it == hello.spec_hashes.end()) {
      problem = "it has no target '" + target + "'";
    } else if (it->second != hash) {
      problem = "its target '" + target + "' differs from the run's (spec hash " +
                log_safe(it->second, 12) + " there, " + hash.substr(0, 12) + " here)";
    }
    if (!problem.empty()) problems += (problems.empty() ? "" : "; ") + problem;
  }
  if (problems.empty()) return "";
  return problems +
         ". Start the evaluator with --targets-dir naming a copy of the coordinator's target "
         "folders "
         "(the same files: `kiln targets` on both shows them)";
}

void Dispatcher::on_hello(const std::string& peer, const proto::Hello& hello, const std::string& key_name) {
  if (std::string bad = proto::hello_problem(hello); !bad.empty()) {
    ++stats_.malformed;
    log_limited(noisy_, spdlog::level::warn, "malformed message",
                fmt::format("refusing a hello from {}: {}", log_safe(peer), bad));
    send(peer,
         proto::make_error_reply("", std::string(proto::kErrorBadMessage), "hello: " + bad).body);
    return;
  }
  std::string why = spec_mismatch(hello);
  if (why.empty()) why = toolchain_mismatch(hello);
  if (!why.empty()) {
    ++stats_.refused_workers;
    spdlog::warn("refusing evaluator {} on {}: {}", log_safe(hello.worker_id), log_safe(hello.node),
                 why);
    send(peer, proto::make_error_reply(
                   "", std::string(proto::kErrorRefused),
                   "this coordinator refuses evaluator " + log_safe(hello.worker_id) + ": " + why)
                   .body);
    drop_worker(peer, "its worker was refused", false);
    return;
  }
  // A worker that reconnects announces itself again from a new connection (it gave up on us:
  // a coordinator that was busy too long, a network blip). What it held under the old
  // connection goes back to the queue now rather than when its leases expire (minutes); if it
  // still answers one of them, the answer is refused (it no longer holds the lease).
  if (!hello.worker_id.empty()) {
    std::vector<std::string> old;
    for (const auto& [p, w] : workers_) {
      if (w.hello.worker_id != hello.worker_id) continue;
      if (w.key_name != key_name) {  // one allowed key must not take over another key's worker
        ++stats_.forged;
        spdlog::warn("refused a hello as worker '{}' from key '{}': that worker connected with key '{}'",
                     log_safe(hello.worker_id), log_safe(key_name), log_safe(w.key_name));
        // Refused, not only answered: a process that went on would keep taking the id's route
        // from the worker that holds it (their sockets share the id as their identity).
        refuse_session(peer, hello,
                       "worker id '" + log_safe(hello.worker_id) +
                           "' is in use by another key; give every worker its own --worker-id");
        return;
      }
      if (p != peer) old.push_back(p);
    }
    if (refuse_shared_id(peer, hello)) return;
    for (const std::string& p : old)
      drop_worker(p, "worker " + hello.worker_id + " reconnected", false);
  }
  // A hello starts a new session of the worker: tasks its earlier session on this routing id held
  // go back to the queue now (a worker restarted under the same id within its silence limit
  // never answers them; one that reconnected may still, and its answer counts only if the task
  // comes back to it).
  if (auto known = workers_.find(peer); known != workers_.end() && !known->second.tasks.empty()) {
    std::vector<std::string> held(known->second.tasks.begin(), known->second.tasks.end());
    for (const std::string& t : held)
      requeue(t, "worker " + hello.worker_id + " announced itself again", false);
  }
  Worker& w = workers_[peer];
  w.key_name = key_name;
  w.hello = hello;
  w.credits = 0;
  std::string backends;
  for (const auto& b : hello.backends) backends += (backends.empty() ? "" : ",") + b;
  spdlog::info("worker {} joined: {} on {}, backends {}{}{}{}", log_safe(hello.worker_id),
               log_safe(hello.role), log_safe(hello.node),
               backends.empty() ? "none" : log_safe(backends),
               hello.gpu_model.empty() ? "" : ", GPU " + log_safe(hello.gpu_model),
               hello.arch.empty() ? "" : ", arch " + log_safe(hello.arch),
               key_name.empty() ? "" : ", key '" + log_safe(key_name) + "'");
}

bool Dispatcher::refuse_shared_id(const std::string& peer, const proto::Hello& hello) {
  auto conflict = sessions_.on_hello(
      hello, [&](const std::string& id, const std::string& session) -> std::optional<std::string> {
        for (const auto& [p, w] : workers_) {
          if (w.hello.worker_id == id && w.hello.session == session) return w.hello.role;
        }
        return std::nullopt;
      });
  if (!conflict) return false;
  ++stats_.refused_workers;
  const std::string id = log_safe(hello.worker_id);
  log_limited(noisy_, spdlog::level::warn, "shared worker id",
              fmt::format("two live processes use worker id '{}': {} on {} (session {}) holds it, "
                          "refusing the {} on {} (session {})",
                          id, log_safe(conflict->other_role), log_safe(conflict->other_node),
                          log_safe(conflict->other_session), log_safe(hello.role),
                          log_safe(hello.node), log_safe(hello.session)));
  refuse_session(peer, hello,
                 "worker id '" + id + "' is in use by another live process (an " +
                     log_safe(conflict->other_role) + " on " + log_safe(conflict->other_node) +
                     "); give every worker its own --worker-id, or leave the option out for a "
                     "unique default");
  return true;
}

void Dispatcher::refuse_session(const std::string& peer, const proto::Hello& hello,
                                const std::string& why) {
  proto::Envelope reply = proto::make_error_reply("", std::string(proto::kErrorRefused), why);
  std::get<proto::Error>(reply.body).session = hello.session;
  send(peer, std::move(reply.body));
}

Status Dispatcher::handle(const std::string& peer, std::string_view payload,
                          const std::string& key_name) {
  const auto now = Clock::now();
  peers_.touch(peer, now);
  Result<proto::Envelope> env = proto::decode(payload);
  if (!env.is_ok()) {
    ++stats_.malformed;
    log_limited(
        noisy_, spdlog::level::warn, "malformed message",
        fmt::format("malformed message from {}: {}", log_safe(peer), env.status().message()));
    send(peer, proto::make_error_reply("", proto::error_code_for(env.status()), env.status().message()).body);
    return Status::ok();
  }
  if (auto* hello = std::get_if<proto::Hello>(&env->body)) {
    on_hello(peer, *hello, key_name);
    return Status::ok();
  }
  auto worker = workers_.find(peer);
  if (worker == workers_.end()) {
    if (std::holds_alternative<proto::Bye>(env->body)) return Status::ok();
    // A worker dropped as silent (stopped, cut off) that comes back, or one that never said hello
    // since this coordinator started: whatever it sends is refused, and it announces itself again.
    ++stats_.unknown_peers;
    if (std::holds_alternative<proto::EvaluationResult>(env->body)) ++stats_.duplicates;
    log_limited(noisy_, spdlog::level::info, "unknown peer",
                fmt::format("{} from unknown peer {}: telling it to say hello",
                            proto::type_name(env->body), log_safe(peer)));
    send(peer, proto::make_error_reply(env->id, std::string(proto::kErrorUnknownPeer),
                                       "this coordinator does not know you; say hello first")
                   .body);
    return Status::ok();
  }
  if (worker->second.key_name != key_name) {
    // Another key on this worker's routing id (a peer that took the id over): nothing it says
    // counts; the real worker reconnects and takes the id back.
    ++stats_.forged;
    spdlog::warn("refused a {} on worker {}'s connection from key '{}' (the worker's key is '{}')",
                 proto::type_name(env->body), log_safe(worker->second.hello.worker_id), log_safe(key_name),
                 log_safe(worker->second.key_name));
    return Status::ok();
  }
  if (auto* proposal = std::get_if<proto::Proposal>(&env->body)) {
    on_proposal(peer, std::move(*proposal));
  } else if (auto* result = std::get_if<proto::EvaluationResult>(&env->body)) {
    KILN_ASSIGN_OR_RETURN(bool merged, on_result(peer, std::move(*result)));
    (void)merged;
  } else if (auto* credit = std::get_if<proto::Credit>(&env->body)) {
    worker->second.credits += credit->count;
  } else if (auto* bye = std::get_if<proto::Bye>(&env->body)) {
    spdlog::info("worker {} left: {}", log_safe(worker->second.hello.worker_id),
                 log_safe(bye->reason));
    drop_worker(peer, "its worker left", false);
  } else if (auto* e = std::get_if<proto::Error>(&env->body)) {
    spdlog::warn("worker {} reported: {} {}", log_safe(worker->second.hello.worker_id),
                 log_safe(e->code), log_safe(e->message));
  } else if (!std::holds_alternative<proto::Heartbeat>(env->body)) {
    send(peer, proto::make_error_reply(env->id, std::string(proto::kErrorBadMessage),
                                       "the coordinator does not accept '" +
                                           std::string(proto::type_name(env->body)) + "' messages").body);
  }
  return Status::ok();
}

Status Dispatcher::dispatch() {
  for (auto& [peer, w] : workers_) {
    while (w.credits > 0 && w.hello.role == proto::kRoleAgent) {
      auto it = std::find_if(proposal_queue_.begin(), proposal_queue_.end(),
                             [&](const ProposalFlight& f) { return serves(w.hello, f.task); });
      if (it == proposal_queue_.end()) break;
      proto::ProposeTask task = std::move(it->task);
      proposal_queue_.erase(it);
      --w.credits;
      ++stats_.proposals_sent;
      const std::string id = task.task_id;
      send(peer, task);
      proposals_in_flight_[id] = {std::move(task), peer, Clock::now() + options_.proposal_timeout};
    }
    while (w.credits > 0) {
      auto it = std::find_if(queue_.begin(), queue_.end(), [&](const proto::EvaluateTask& t) {
        auto f = faulted_.find(t.task_id);
        return serves(w.hello, t, options_.exact_gpu_models) &&
               (f == faulted_.end() || !f->second.count(w.hello.worker_id));
      });
      if (it == queue_.end()) break;
      proto::EvaluateTask task = std::move(*it);
      queue_.erase(it);
      queued_ids_.erase(task.task_id);
      const auto deadline = Clock::now() + options_.lease;
      // The lease is in Redis before the task leaves: a coordinator that dies right after the
      // send finds it on restart.
      Status leased = store_->lease_task(task.task_id,
                                         proto::encode({proto::kProtocolVersion, task.task_id, task}),
                                         epoch_ms(deadline));
      if (!leased.is_ok()) {
        queued_ids_.insert(task.task_id);
        queue_.push_front(std::move(task));
        return leased;
      }
      w.tasks.insert(task.task_id);
      --w.credits;
      ++stats_.dispatched;
      const std::string id = task.task_id;
      send(peer, task);
      in_flight_[id] = {std::move(task), peer, deadline};
    }
  }
  return Status::ok();
}

Result<std::vector<proto::EvaluationResult>> Dispatcher::poll(int timeout_ms) {
  merged_.clear();
  // Work queued since the last turn (a child proposed on a result) leaves before this turn
  // waits: otherwise every task waited out one whole timeout with a worker idle.
  KILN_RETURN_IF_ERROR(dispatch());
  int wait = timeout_ms;
  while (true) {
    Result<std::optional<net::RoutedMessage>> got = router_.receive(wait);
    if (!got.is_ok()) {
      if (got.status().code() == StatusCode::kInvalidArgument) {  // a bad frame shape: go on
        ++stats_.malformed;
        continue;
      }
      return got.status();
    }
    if (!got->has_value()) break;
    KILN_RETURN_IF_ERROR(handle((*got)->peer, (*got)->payload, (*got)->user_id));
    wait = 0;  // drain what is already waiting, then do the periodic work
  }
  const auto now = Clock::now();
  for (const std::string& peer : peers_.expire(now)) {
    auto w = workers_.find(peer);
    if (w == workers_.end()) continue;
    ++stats_.workers_lost;
    spdlog::warn("worker {} is silent; its {} task(s) go back to the queue",
                 log_safe(w->second.hello.worker_id), w->second.tasks.size());
    drop_worker(peer, "worker " + w->second.hello.worker_id + " went silent", true);
  }
  std::vector<std::string> stale;
  for (const auto& [id, f] : in_flight_) {
    if (f.deadline <= now) stale.push_back(id);
  }
  for (const auto& id : stale) requeue(id, "its lease expired", false);
  std::vector<std::string> late;
  for (const auto& [id, f] : proposals_in_flight_) {
    if (f.deadline <= now) late.push_back(id);
  }
  for (const auto& f : proposal_queue_) {
    if (f.deadline <= now) late.push_back(f.task.task_id);
  }
  for (const auto& id : late) fail_proposal(id, "no proposal within the timeout");
  for (const std::string& peer : peers_.peers_due_heartbeat(now)) send(peer, proto::Heartbeat{});
  log_suppressed(noisy_, spdlog::level::warn);
  KILN_RETURN_IF_ERROR(dispatch());
  return std::move(merged_);
}

void Dispatcher::shutdown(std::string_view code, const std::string& reason) {
  for (const auto& [peer, w] : workers_) send(peer, proto::Bye{reason, std::string(code)});
}

std::vector<WorkerView> Dispatcher::worker_views() const {
  std::map<std::string, size_t> proposals;  // agents hold proposals, not leased tasks
  for (const auto& [id, f] : proposals_in_flight_) ++proposals[f.peer];
  std::vector<WorkerView> out;
  for (const auto& [peer, w] : workers_) {
    const proto::Hello& h = w.hello;
    auto p = proposals.find(peer);
    out.push_back({h.worker_id, h.role, h.node, h.gpu_model, h.arch, h.version, h.backends,
                   h.capacity, w.credits, w.tasks.size() + (p == proposals.end() ? 0 : p->second)});
  }
  return out;
}

}  // namespace kiln::coordinator
