// The proposal agent daemon (`kiln agent`): connects to a coordinator as a DEALER in the agent
// role, takes `propose` tasks within its capacity and answers each with a `proposal` of new
// candidates made by a TaskProposer: the built-in one (a candidate is a configuration of the
// target's template, its source the template text as the agent's targets folder holds it) or the
// LLM proposer (agent/llm/). The coordinator dedupes, evaluates and judges them like its own
// children. The socket is served by one thread; proposals are made on `concurrency()` worker
// threads, so a model call that takes a minute never stops heartbeats. Heartbeats and reconnects
// like an evaluator; a task it cannot serve (unknown target, no template, nothing new around the
// parent, LLM budget spent) gets a proposal with `error` set, never silence.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent/builtin_proposer.h"
#include "shared/heartbeat.h"
#include "shared/protocol.h"
#include "shared/status.h"
#include "shared/transport.h"
#include "shared/target_spec.h"

namespace kiln::agent {

struct AgentOptions {
  std::string connect;             // coordinator endpoint, e.g. tcp://10.0.0.5:5555
  std::string proposer = "builtin";  // "builtin" or "llm"
  std::string llm_config;          // proposer "llm": its config file (agent/llm/llm_config.h)
  std::string stats_path;          // when set: the proposer's statistics (JSON), rewritten per task
  std::string targets_dir;         // --targets-dir: folders before the built-in ones ("": none)
  std::string worker_id;           // default: <host>-agent-<pid>
  std::vector<std::string> backends;  // backends it proposes for; empty: any
  uint32_t capacity = 4;           // propose tasks held at once
  uint64_t seed = 1;               // random seed of the proposer
  net::HeartbeatPolicy heartbeat;
  net::CurveClient curve;  // CURVE keys (docs/security.md); empty: none
};

// What the daemon asks for proposals. answer() may block (model calls); it is called from
// concurrency() threads at once and must stop early when `cancel` becomes true. `received` is when
// the task arrived (deadlines count from there).
class TaskProposer {
 public:
  virtual ~TaskProposer() = default;
  virtual proto::Proposal answer(const proto::ProposeTask& task, std::chrono::steady_clock::time_point received,
                                 const std::atomic<bool>& cancel) = 0;
  virtual uint32_t concurrency() const { return 1; }
  virtual std::string name() const = 0;
  virtual nlohmann::json stats() const { return nlohmann::json::object(); }
};

// Turns propose tasks into proposals with the built-in proposer, one proposer per (target,
// backend), kept across tasks so the playbook's tier progression carries on. No sockets: the
// daemon below feeds it, and tests call it directly. Not thread-safe (concurrency 1).
class BuiltinAgent : public TaskProposer {
 public:
  BuiltinAgent(std::string targets_dir, uint64_t seed);
  proto::Proposal answer(const proto::ProposeTask& task);
  proto::Proposal answer(const proto::ProposeTask& task, std::chrono::steady_clock::time_point,
                         const std::atomic<bool>&) override {
    return answer(task);
  }
  std::string name() const override { return "builtin"; }

 private:
  struct PerTarget {
    TargetSpec spec;
    const KernelSpec* tmpl = nullptr;
    std::unique_ptr<BuiltinProposer> proposer;
    Shape shape;  // where the template's constraints are evaluated
    DType dtype = DType::kF32;
    std::set<Params> proposed;  // never proposes the same configuration twice
  };
  Result<PerTarget*> target(const std::string& name, const std::string& backend);

  std::string targets_dir_;
  std::mt19937_64 rng_;
  std::map<std::string, std::unique_ptr<PerTarget>> targets_;  // by "<target>/<backend>"
};

// Runs until `stop` becomes true or the coordinator says bye. Fails only when running is
// impossible (bad endpoint, unknown proposer, unreadable LLM config).
Status run_agent_daemon(const AgentOptions& options, const std::atomic<bool>& stop);

// The same loop with a proposer the caller made (in-process agents, tests).
Status run_agent_daemon(const AgentOptions& options, TaskProposer& proposer, const std::atomic<bool>& stop);

}  // namespace kiln::agent
