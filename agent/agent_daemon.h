// The proposal agent daemon (`kiln agent`): connects to a coordinator as a DEALER in the agent
// role, takes `propose` tasks within its capacity and answers each with a `proposal` of new
// candidates. With the built-in proposer a candidate is a configuration of the target's template
// (its source is the template text, as the agent's targets folder holds it); the coordinator
// dedupes, evaluates and judges them like its own children. Heartbeats and reconnects like an
// evaluator; a task it cannot serve (unknown target, no template, nothing new around the parent)
// gets a proposal with `error` set, never silence.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "agent/builtin_proposer.h"
#include "shared/heartbeat.h"
#include "shared/protocol.h"
#include "shared/status.h"
#include "shared/target_spec.h"

namespace kiln::agent {

struct AgentOptions {
  std::string connect;             // coordinator endpoint, e.g. tcp://10.0.0.5:5555
  std::string proposer = "builtin";
  std::string targets_dir;         // default: the built-in targets
  std::string worker_id;           // default: <host>-agent-<pid>
  std::vector<std::string> backends;  // backends it proposes for; empty: any
  uint32_t capacity = 4;           // propose tasks held at once
  uint64_t seed = 1;               // random seed of the proposer
  net::HeartbeatPolicy heartbeat;
};

// Turns propose tasks into proposals with the built-in proposer, one proposer per (target,
// backend), kept across tasks so the playbook's tier progression carries on. No sockets: the
// daemon below feeds it, and tests call it directly.
class BuiltinAgent {
 public:
  BuiltinAgent(std::string targets_dir, uint64_t seed);
  proto::Proposal answer(const proto::ProposeTask& task);

 private:
  struct PerTarget {
    TargetSpec spec;
    const KernelSpec* tmpl = nullptr;
    std::unique_ptr<BuiltinProposer> proposer;
    std::set<Params> proposed;  // never proposes the same configuration twice
  };
  Result<PerTarget*> target(const std::string& name, const std::string& backend);

  std::string targets_dir_;
  std::mt19937_64 rng_;
  std::map<std::string, std::unique_ptr<PerTarget>> targets_;  // by "<target>/<backend>"
};

// Runs until `stop` becomes true or the coordinator says bye. Fails only when running is
// impossible (bad endpoint, unknown proposer).
Status run_agent_daemon(const AgentOptions& options, const std::atomic<bool>& stop);

}  // namespace kiln::agent
