// Agent daemon: see agent_daemon.h. One thread: built-in proposals take microseconds, so each
// task is answered as it arrives.
#include "agent/agent_daemon.h"

#include <unistd.h>

#include <chrono>
#include <thread>

#include <spdlog/spdlog.h>

#include "shared/build_info.h"
#include "shared/transport.h"

namespace kiln::agent {
namespace {

using Clock = std::chrono::steady_clock;

std::string default_worker_id() {
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  return std::string(host) + "-agent-" + std::to_string(getpid());
}

bool valid_target_name(const std::string& name) {
  return !name.empty() && name.find('/') == std::string::npos && name.find("..") == std::string::npos;
}

}  // namespace

BuiltinAgent::BuiltinAgent(std::string targets_dir, uint64_t seed)
    : targets_dir_(std::move(targets_dir)), rng_(seed) {}

Result<BuiltinAgent::PerTarget*> BuiltinAgent::target(const std::string& name, const std::string& backend) {
  const std::string key = name + "/" + backend;
  if (auto it = targets_.find(key); it != targets_.end()) return it->second.get();
  if (!valid_target_name(name)) return invalid_argument("bad target name '" + name + "'");
  KILN_ASSIGN_OR_RETURN(TargetSpec spec, load_target(targets_dir_ + "/" + name));
  auto t = std::make_unique<PerTarget>();
  t->spec = std::move(spec);
  const BackendSpec* b = t->spec.backend(backend);
  if (!b) return invalid_argument("target " + name + " has no " + backend + " kernels here");
  if (!b->tunable) return invalid_argument("target " + name + " has no template to propose from");
  t->tmpl = &*b->tunable;
  t->proposer = std::make_unique<BuiltinProposer>(*t->tmpl, t->spec.benchmark_for(backend), b->dtypes.front());
  return (targets_[key] = std::move(t)).get();
}

proto::Proposal BuiltinAgent::answer(const proto::ProposeTask& task) {
  proto::Proposal out;
  out.task_id = task.task_id;
  out.target = task.target;
  Result<PerTarget*> t = target(task.target, task.backend);
  if (!t.is_ok()) {
    out.error = t.status().message();
    return out;
  }
  PerTarget& pt = **t;
  if (task.parents.empty()) {
    out.error = "the task names no parent to propose from";
    return out;
  }
  const proto::ParentInfo& parent = task.parents.front();
  const Params* second = task.parents.size() > 1 ? &task.parents[1].params : nullptr;
  std::set<Params> parents;
  for (const auto& p : task.parents) parents.insert(p.params);
  SeenFn seen = [&](const Params& p) { return pt.proposed.count(p) > 0 || parents.count(p) > 0; };
  std::string reason;
  for (uint32_t i = 0; i < std::max<uint32_t>(1, task.count); ++i) {
    // Steered by the parent's bottleneck class when the coordinator sent one (exactly propose()
    // otherwise); the choice is in the candidate's note.
    Proposal p = pt.proposer->propose_guided(parent.params, second, parent.bottleneck, seen, rng_);
    if (p.empty()) {
      reason = p.reason;
      break;
    }
    pt.proposed.insert(p.params);
    proto::ProposedCandidate c;
    c.source = pt.tmpl->source;
    c.params = p.params;
    c.operator_name = p.operator_name;
    c.parent_id = parent.candidate_id;
    c.note = p.description;
    out.candidates.push_back(std::move(c));
  }
  if (out.candidates.empty()) out.error = reason.empty() ? "nothing new around the parent" : reason;
  return out;
}

Status run_agent_daemon(const AgentOptions& options_in, const std::atomic<bool>& stop) {
  AgentOptions options = options_in;
  if (options.proposer != "builtin") {
    return invalid_argument("unknown proposer '" + options.proposer +
                            "' (this build has: builtin; LLM proposers arrive with step 6)");
  }
  if (options.worker_id.empty()) options.worker_id = default_worker_id();
  if (options.targets_dir.empty()) options.targets_dir = default_targets_dir();
  if (options.capacity == 0) return invalid_argument("capacity must be at least 1");
  BuiltinAgent agent(options.targets_dir, options.seed);

  zmq::context_t context(1);
  net::SocketOptions so;
  KILN_ASSIGN_OR_RETURN(net::DealerSocket dealer,
                        net::DealerSocket::connect(context, options.connect, so, options.worker_id));
  proto::IdGenerator ids(options.worker_id);
  net::PeerLiveness liveness(options.heartbeat, Clock::now());
  auto send = [&](proto::Message body) {
    Status s = dealer.send(proto::encode({proto::kProtocolVersion, ids.next(), std::move(body)}));
    if (!s.is_ok()) spdlog::warn("send failed: {}", s.to_string());
    liveness.mark_heartbeat_sent(Clock::now());
  };
  auto announce = [&] {
    proto::Hello hello;
    hello.role = std::string(proto::kRoleAgent);
    char host[256] = {};
    gethostname(host, sizeof(host) - 1);
    hello.node = host;
    hello.worker_id = options.worker_id;
    hello.backends = options.backends;
    hello.capacity = options.capacity;
    hello.version = KILN_VERSION;
    send(hello);
    send(proto::Credit{options.capacity});  // answers are immediate: nothing is held across
  };
  announce();
  spdlog::info("agent {} ({} proposer) connected to {}", options.worker_id, options.proposer, options.connect);
  uint64_t answered = 0;
  while (!stop.load()) {
    Result<std::optional<std::string>> got = dealer.receive(100);
    const auto now = Clock::now();
    if (!got.is_ok()) {
      spdlog::error("receive failed: {}", got.status().to_string());
      break;
    }
    if (got->has_value()) {
      liveness.on_message(now);
      Result<proto::Envelope> env = proto::decode(**got);
      if (!env.is_ok()) {
        spdlog::warn("bad message from the coordinator: {}", env.status().message());
        send(proto::make_error_reply("", std::string(proto::error_code_for(env.status())),
                                     env.status().message()).body);
      } else if (auto* task = std::get_if<proto::ProposeTask>(&env->body)) {
        proto::Proposal p = agent.answer(*task);
        if (!p.error.empty()) spdlog::info("task {} ({}): {}", task->task_id, task->target, p.error);
        ++answered;
        send(std::move(p));
        send(proto::Credit{1});
      } else if (std::holds_alternative<proto::Bye>(env->body)) {
        spdlog::info("coordinator said bye: {} ({} proposals made)", std::get<proto::Bye>(env->body).reason,
                     answered);
        break;
      } else if (!std::holds_alternative<proto::Heartbeat>(env->body) &&
                 !std::holds_alternative<proto::Error>(env->body)) {
        send(proto::make_error_reply(env->id, std::string(proto::kErrorBadMessage),
                                     "an agent does not accept '" + std::string(proto::type_name(env->body)) +
                                         "' messages").body);
      }
    }
    if (liveness.server_dead(now)) {
      auto delay = liveness.next_reconnect_delay();
      spdlog::warn("coordinator silent; reconnecting in {} ms", delay.count());
      for (auto waited = std::chrono::milliseconds(0); waited < delay && !stop.load();
           waited += std::chrono::milliseconds(100)) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
      if (Status s = dealer.reconnect(); !s.is_ok()) spdlog::error("reconnect: {}", s.to_string());
      liveness.on_reconnect(Clock::now());
      announce();
    } else if (liveness.should_send_heartbeat(now)) {
      send(proto::Heartbeat{});
    }
  }
  send(proto::Bye{"agent stopping"});
  return Status::ok();
}

}  // namespace kiln::agent
