// The LLM proposer: turns a propose task into candidates written by a language model.
//
// Per task: the parents it is handed are compared with what this proposer proposed before (a
// proposal that comes back as a parent was kept by the search: an accepted improvement, credited to
// the model that wrote it); failed children it is handed are counted against their model and the
// first one whose lineage has repairs left (`repair_tries`) goes back to a model with its log
// (operator "llm repair"); otherwise a model is asked for a faster variant of the parent (operator
// "llm rewrite"). The model is chosen by ModelBandit. A reply is parsed and validated
// (prompt.h); a refused or duplicate reply is counted and the model is asked again with the reason,
// up to `asks_per_task` calls within `task_deadline_s` from the task's arrival. Once the token or
// cost budget is spent no model is asked again and tasks are answered with that error, so the
// coordinator proposes in-process. Thread-safe: the daemon calls answer() from `concurrency`
// threads; model calls run outside the lock.
#pragma once

#include <atomic>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "agent/agent_daemon.h"
#include "agent/llm/llm_client.h"
#include "agent/llm/llm_config.h"
#include "agent/llm/model_bandit.h"
#include "shared/protocol.h"
#include "shared/target_spec.h"

namespace kiln::agent::llm {

class LlmProposer : public TaskProposer {
 public:
  LlmProposer(LlmConfig config, std::string targets_dir, uint64_t seed);

  proto::Proposal answer(const proto::ProposeTask& task, Clock::time_point received,
                         const std::atomic<bool>& cancel) override;
  uint32_t concurrency() const override { return config_.concurrency; }
  std::string name() const override { return "llm"; }
  nlohmann::json stats() const override;

  bool budget_spent() const;

 private:
  struct Known {  // a candidate this proposer sent, by novelty key
    size_t model = 0;
    uint32_t repair_depth = 0;  // 0: a rewrite; n: the n-th repair in its lineage
    bool judged = false;        // counted as accepted or failed already
  };
  struct PerTarget {
    TargetSpec spec;
    const KernelSpec* tmpl = nullptr;
    std::deque<std::string> failures;  // recent failed children, one line each
  };
  Result<PerTarget*> target(const std::string& name, const std::string& backend);
  // Takes in what the task says about earlier proposals; returns the failed child to repair, if
  // any, and its repair depth.
  std::optional<std::pair<proto::FailedChild, uint32_t>> learn(const proto::ProposeTask& task, PerTarget& t);
  void charge(size_t model, const Result<ChatReply>& reply);

  LlmConfig config_;
  std::string targets_dir_;
  LlmClient client_;
  ModelBandit bandit_;

  mutable std::mutex mu_;
  std::map<std::string, std::unique_ptr<PerTarget>> targets_;  // by "<target>/<backend>"
  std::map<std::string, Known> known_;      // every candidate proposed, by novelty key
  std::set<std::string> seen_;              // novelty keys proposed or seen as parents
  std::set<std::string> repaired_;          // failed children (candidate ids) already handled
  uint64_t tasks_ = 0, answered_ = 0, failed_tasks_ = 0, budget_refusals_ = 0;
  uint64_t tokens_ = 0;
  double cost_usd_ = 0;
  std::map<std::string, uint64_t> rejections_;  // reason kind -> count
};

}  // namespace kiln::agent::llm
