// See worker_link.h.
#include "shared/worker_link.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "shared/build_info.h"
#include "shared/text.h"

namespace kiln::net {

using Clock = std::chrono::steady_clock;

WorkerLink::WorkerLink(DealerSocket dealer, const HeartbeatPolicy& heartbeat, std::string role,
                       const std::string& worker_id)
    : dealer_(std::move(dealer)),
      ids_(worker_id),
      liveness_(heartbeat, Clock::now()),
      role_(std::move(role)),
      worker_id_(worker_id),
      session_(random_identity()) {}

Result<WorkerLink> WorkerLink::connect(zmq::context_t& context, const std::string& endpoint,
                                       const std::string& worker_id, const HeartbeatPolicy& heartbeat,
                                       std::string role, const CurveClient& curve) {
  KILN_ASSIGN_OR_RETURN(DealerSocket dealer,
                        DealerSocket::connect(context, endpoint, SocketOptions{}, worker_id, curve));
  return WorkerLink(std::move(dealer), heartbeat, std::move(role), worker_id);
}

namespace {

// The task id of a task (evaluate, propose) or of its answer (result, proposal); null otherwise.
const std::string* task_id_of(const proto::Message& m) {
  if (const auto* t = std::get_if<proto::EvaluateTask>(&m)) return &t->task_id;
  if (const auto* t = std::get_if<proto::ProposeTask>(&m)) return &t->task_id;
  if (const auto* r = std::get_if<proto::EvaluationResult>(&m)) return &r->task_id;
  if (const auto* p = std::get_if<proto::Proposal>(&m)) return &p->task_id;
  return nullptr;
}

bool is_task(const proto::Message& m) {
  return std::holds_alternative<proto::EvaluateTask>(m) ||
         std::holds_alternative<proto::ProposeTask>(m);
}

}  // namespace

void WorkerLink::send(proto::Message body) {
  if (auto* hello = std::get_if<proto::Hello>(&body)) hello->session = session_;
  if (const std::string* id = task_id_of(body); id && !is_task(body)) held_tasks_.erase(*id);
  Status s = dealer_.send(proto::encode({proto::kProtocolVersion, ids_.next(), std::move(body)}));
  if (!s.is_ok()) spdlog::warn("send failed: {}", s.to_string());
  liveness_.mark_heartbeat_sent(Clock::now());
}

Result<std::optional<proto::Envelope>> WorkerLink::receive(int timeout_ms) {
  KILN_ASSIGN_OR_RETURN(std::optional<std::string> got, dealer_.receive(timeout_ms));
  if (!got) return std::optional<proto::Envelope>();
  liveness_.on_message(Clock::now());
  Result<proto::Envelope> env = proto::decode(*got);
  if (!env.is_ok()) {
    spdlog::warn("bad message from the coordinator: {}", env.status().message());
    send(proto::make_error_reply("", std::string(proto::error_code_for(env.status())), env.status().message()).body);
    return std::optional<proto::Envelope>();
  }
  if (auto* e = std::get_if<proto::Error>(&env->body)) {
    if (e->code == proto::kErrorUnknownPeer) {
      if (!announce_due_)
        spdlog::warn("the coordinator does not know this worker ({}); announcing again",
                     log_safe(e->message));
      announce_due_ = true;
    } else if (e->code == proto::kErrorRefused && !e->session.empty() && e->session != session_) {
      // Meant for another process that uses this worker id: it reached this one because the two
      // take the routing id from each other. That process stops; this one goes on.
      spdlog::warn(
          "another process uses worker id '{}': the coordinator refused it ({}); give "
          "every worker its own --worker-id",
          log_safe(worker_id_), log_safe(e->message));
    } else if (e->code == proto::kErrorRefused) {
      return std::optional<proto::Envelope>(proto::Envelope{
          env->v, env->id, proto::Bye{e->message, std::string(proto::kByeRefused)}});
    } else {
      spdlog::warn("the coordinator reported: {} {}", log_safe(e->code), log_safe(e->message));
    }
    return std::optional<proto::Envelope>();
  }
  if (std::holds_alternative<proto::Heartbeat>(env->body)) return std::optional<proto::Envelope>();
  if (is_task(env->body) && !held_tasks_.insert(*task_id_of(env->body)).second) {
    spdlog::warn("task {} arrived again while this worker holds it; it is answered once",
                 log_safe(*task_id_of(env->body)));
    send(proto::Credit{1});
    return std::optional<proto::Envelope>();
  }
  return std::optional<proto::Envelope>(std::move(env).value());
}

void WorkerLink::refuse(const proto::Envelope& env) {
  // A task this worker's role does not take is answered here, not held.
  if (const std::string* id = task_id_of(env.body)) held_tasks_.erase(*id);
  send(proto::make_error_reply(env.id, std::string(proto::kErrorBadMessage),
                               role_ + " does not accept '" + std::string(proto::type_name(env.body)) +
                                   "' messages").body);
}

std::optional<Status> WorkerLink::after_bye(const proto::Bye& bye) {
  const std::string reason = log_safe(bye.reason);
  if (bye.code == proto::kByeFinished) {
    spdlog::info("the coordinator says the run is finished: {}", reason);
    return Status::ok();
  }
  if (bye.code == proto::kByeRefused) {
    spdlog::error("the coordinator refused this worker: {}", reason);
    return failed_precondition("the coordinator refused this worker: " + reason);
  }
  spdlog::warn("the coordinator is stopping ({}); waiting for it to come back",
               reason.empty() ? "no reason given" : reason);
  liveness_.mark_server_gone();
  return std::nullopt;
}

void WorkerLink::keep_alive(const std::atomic<bool>& stop, const std::function<void()>& announce) {
  const auto now = Clock::now();
  if (announce_due_) {
    announce_due_ = false;
    announce();
  }
  if (liveness_.server_dead(now)) {
    const auto delay = liveness_.next_reconnect_delay();
    spdlog::warn("coordinator silent; reconnecting in {} ms", delay.count());
    for (auto waited = std::chrono::milliseconds(0); waited < delay && !stop.load();
         waited += std::chrono::milliseconds(100)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    if (Status s = dealer_.reconnect(); !s.is_ok()) spdlog::error("reconnect: {}", s.to_string());
    liveness_.on_reconnect(Clock::now());
    announce();
  } else if (liveness_.should_send_heartbeat(now)) {
    send(proto::Heartbeat{});
  }
}

proto::Hello worker_hello(std::string_view role, const std::string& worker_id, std::vector<std::string> backends,
                          uint32_t capacity) {
  proto::Hello hello;
  hello.role = std::string(role);
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  hello.node = host;
  hello.worker_id = worker_id;
  hello.backends = std::move(backends);
  hello.capacity = capacity;
  hello.version = KILN_VERSION;
  return hello;
}

proto::Hello evaluator_hello(const std::string& worker_id, const std::string& backend,
                             uint32_t capacity, std::string gpu_model, std::string arch,
                             std::map<std::string, std::string> spec_hashes,
                             std::string toolchain) {
  proto::Hello hello = worker_hello(proto::kRoleEvaluator, worker_id, {backend}, capacity);
  hello.gpu_model = std::move(gpu_model);
  hello.arch = std::move(arch);
  hello.spec_hashes = std::move(spec_hashes);
  hello.toolchain = std::move(toolchain);
  return hello;
}

}  // namespace kiln::net
