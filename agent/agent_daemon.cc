// Agent daemon: see agent_daemon.h. The socket thread queues tasks for the worker threads and
// sends the proposals they finish; it never waits on a proposer.
#include "agent/agent_daemon.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <fstream>
#include <mutex>
#include <thread>

#include "agent/llm/llm_proposer.h"
#include "agent/template_target.h"
#include "evaluator/evaluation.h"
#include "shared/build_info.h"
#include "shared/text.h"
#include "shared/worker_link.h"

namespace kiln::agent {
namespace {

using Clock = std::chrono::steady_clock;

std::string default_worker_id() {
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  return std::string(host) + "-agent-" + std::to_string(getpid());
}

}  // namespace

BuiltinAgent::BuiltinAgent(std::string targets_dir, uint64_t seed)
    : targets_dir_(std::move(targets_dir)), rng_(seed) {}

Result<BuiltinAgent::PerTarget*> BuiltinAgent::target(const std::string& name, const std::string& backend) {
  const std::string key = name + "/" + backend;
  if (auto it = targets_.find(key); it != targets_.end()) return it->second.get();
  KILN_ASSIGN_OR_RETURN(TargetSpec spec, load_template_target(targets_dir_, name, backend));
  auto t = std::make_unique<PerTarget>();
  t->spec = std::move(spec);
  const BackendSpec* b = t->spec.backend(backend);
  t->tmpl = &*b->tunable;
  t->shape = t->spec.benchmark_for(backend);
  t->dtype = b->dtypes.front();
  t->proposer = std::make_unique<BuiltinProposer>(*t->tmpl, t->shape, t->dtype);
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
  // Seen: what this agent proposed before, the parents, and what the population evaluated.
  std::set<Params> known(task.evaluated.begin(), task.evaluated.end());
  for (const auto& p : task.parents) known.insert(p.params);
  SeenFn seen = [&](const Params& p) { return pt.proposed.count(p) > 0 || known.count(p) > 0; };
  std::string reason;
  const uint32_t want = std::max<uint32_t>(1, task.count);
  auto add = [&](Params params, std::string op, std::string note) {
    pt.proposed.insert(params);
    proto::ProposedCandidate c;
    c.source = pt.tmpl->source;
    c.params = std::move(params);
    c.operator_name = std::move(op);
    c.parent_id = parent.candidate_id;
    c.note = std::move(note);
    out.candidates.push_back(std::move(c));
  };
  if (!pt.proposer->is_configuration(parent.params)) {
    // The parent is the target's seed, not a configuration of the template: configurations not
    // yet proposed, drawn at random (the coordinator's own template children take the space in
    // sweep order), from at most kSeedDrawLimit of them in a huge space.
    constexpr uint64_t kSeedDrawLimit = 200000;
    std::vector<Params> drawn;
    uint64_t unseen = 0;
    eval::for_each_config(*pt.tmpl, pt.shape, pt.dtype, [&](const Params& config) {
      if (seen(config)) return true;
      ++unseen;  // reservoir sampling: each unseen configuration kept with probability want/unseen
      if (drawn.size() < want) {
        drawn.push_back(config);
      } else if (const uint64_t j = rng_() % unseen; j < want) {
        drawn[j] = config;
      }
      return unseen < kSeedDrawLimit;
    });
    for (Params& config : drawn) {
      add(std::move(config), "template",
          "the parent is the seed: a configuration of the template drawn at random");
    }
    if (out.candidates.empty()) out.error = "every configuration of the template was proposed";
    return out;
  }
  for (uint32_t i = 0; i < want; ++i) {
    // Steered by the parent's bottleneck class when the coordinator sent one (exactly propose()
    // otherwise); the choice is in the candidate's note.
    Proposal p = pt.proposer->propose_guided(parent.params, second, parent.bottleneck, seen, rng_);
    if (p.empty()) {
      reason = p.reason;
      break;
    }
    add(std::move(p.params), std::move(p.operator_name), std::move(p.description));
  }
  if (out.candidates.empty()) out.error = reason.empty() ? "nothing new around the parent" : reason;
  return out;
}

namespace {

// Tasks in, proposals out, between the socket thread and the proposer's worker threads.
struct WorkQueue {
  struct Item {
    proto::ProposeTask task;
    Clock::time_point received;
  };
  std::mutex mu;
  std::condition_variable cv;
  std::deque<Item> tasks;
  std::deque<proto::Proposal> done;
  bool quit = false;
};

void work(WorkQueue& q, TaskProposer& proposer, const std::atomic<bool>& cancel) {
  for (;;) {
    WorkQueue::Item item;
    {
      std::unique_lock<std::mutex> lock(q.mu);
      q.cv.wait(lock, [&] { return q.quit || !q.tasks.empty(); });
      if (q.quit) return;
      item = std::move(q.tasks.front());
      q.tasks.pop_front();
    }
    proto::Proposal p = proposer.answer(item.task, item.received, cancel);
    std::lock_guard<std::mutex> lock(q.mu);
    q.done.push_back(std::move(p));
  }
}

void write_stats(const std::string& path, const TaskProposer& proposer) {
  if (path.empty()) return;
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp);
    out << proposer.stats().dump(2) << "\n";
    if (!out) {
      spdlog::warn("cannot write the proposer's statistics to {}", tmp);
      return;
    }
  }
  std::rename(tmp.c_str(), path.c_str());
}

}  // namespace

Status run_agent_daemon(const AgentOptions& options, const std::atomic<bool>& stop) {
  if (options.proposer == "builtin") {
    BuiltinAgent agent(options.targets_dir, options.seed);
    return run_agent_daemon(options, agent, stop);
  }
  if (options.proposer == "llm") {
    if (options.llm_config.empty()) return invalid_argument("the llm proposer needs a config file (--llm FILE)");
    KILN_ASSIGN_OR_RETURN(llm::LlmConfig config, llm::load_llm_config(options.llm_config));
    for (const llm::ModelConfig& m : config.models) {
      // A missing key is refused now rather than on every task.
      if (Result<std::string> key = llm::api_key(m); !key.is_ok()) return key.status();
    }
    llm::LlmProposer agent(std::move(config), options.targets_dir, options.seed);
    return run_agent_daemon(options, agent, stop);
  }
  return invalid_argument("unknown proposer '" + options.proposer + "' (this build has: builtin, llm)");
}

Status run_agent_daemon(const AgentOptions& options_in, TaskProposer& proposer, const std::atomic<bool>& stop) {
  AgentOptions options = options_in;
  if (options.worker_id.empty()) options.worker_id = default_worker_id();
  if (options.capacity == 0) return invalid_argument("capacity must be at least 1");

  zmq::context_t context(1);
  KILN_ASSIGN_OR_RETURN(net::WorkerLink link, net::WorkerLink::connect(context, options.connect, options.worker_id,
                                                                      options.heartbeat, "an agent", options.curve));
  auto announce = [&] {
    link.send(net::worker_hello(proto::kRoleAgent, options.worker_id, options.backends, options.capacity));
    link.send(proto::Credit{options.capacity});
  };

  WorkQueue queue;
  std::atomic<bool> cancel{false};
  std::vector<std::thread> workers;
  for (uint32_t i = 0; i < std::max<uint32_t>(1, proposer.concurrency()); ++i) {
    workers.emplace_back([&] { work(queue, proposer, cancel); });
  }
  announce();
  spdlog::info("agent {} ({} proposer) connected to {}", options.worker_id, proposer.name(), options.connect);
  uint64_t answered = 0;
  Status outcome = Status::ok();
  auto drain = [&] {
    std::deque<proto::Proposal> done;
    {
      std::lock_guard<std::mutex> lock(queue.mu);
      done.swap(queue.done);
    }
    for (proto::Proposal& p : done) {
      if (!p.error.empty()) spdlog::info("task {} ({}): {}", log_safe(p.task_id), log_safe(p.target), log_safe(p.error, 400));
      ++answered;
      link.send(std::move(p));
      link.send(proto::Credit{1});
    }
    if (!done.empty()) write_stats(options.stats_path, proposer);
  };
  while (!stop.load()) {
    Result<std::optional<proto::Envelope>> got = link.receive(20);
    if (!got.is_ok()) {
      spdlog::error("receive failed: {}", got.status().to_string());
      break;
    }
    if (got->has_value()) {
      proto::Envelope& env = **got;
      if (auto* task = std::get_if<proto::ProposeTask>(&env.body)) {
        std::lock_guard<std::mutex> lock(queue.mu);
        queue.tasks.push_back({std::move(*task), Clock::now()});
        queue.cv.notify_one();
      } else if (auto* bye = std::get_if<proto::Bye>(&env.body)) {
        if (std::optional<Status> end = link.after_bye(*bye)) {
          spdlog::info("{} proposals made", answered);
          outcome = *end;
          break;
        }
      } else {
        link.refuse(env);
      }
    }
    drain();
    link.keep_alive(stop, announce);
  }
  cancel.store(true);
  {
    std::lock_guard<std::mutex> lock(queue.mu);
    queue.quit = true;
  }
  queue.cv.notify_all();
  for (std::thread& t : workers) t.join();
  write_stats(options.stats_path, proposer);
  if (nlohmann::json st = proposer.stats(); !st.empty()) spdlog::info("{} proposer statistics: {}", proposer.name(), st.dump());
  if (outcome.is_ok()) link.send(proto::Bye{"agent stopping", std::string(proto::kByeLeaving)});
  return outcome;
}

}  // namespace kiln::agent
