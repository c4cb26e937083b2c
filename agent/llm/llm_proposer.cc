// LLM proposer: see llm_proposer.h.
#include "agent/llm/llm_proposer.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "agent/llm/prompt.h"
#include "agent/template_target.h"

namespace kiln::agent::llm {
namespace {

std::vector<std::string> model_names(const LlmConfig& c) {
  std::vector<std::string> names;
  for (const ModelConfig& m : c.models) names.push_back(m.name);
  return names;
}

// The template's parameters of `params` (parents may carry fixed macros too).
std::map<std::string, std::string> space_params(const KernelSpec& tmpl, const std::map<std::string, std::string>& params) {
  std::map<std::string, std::string> out;
  for (const auto& [k, v] : params) {
    if (tmpl.space.count(k)) out[k] = v;
  }
  return out;
}

bool repairable(const std::string& outcome) {
  return outcome == "compile_error" || outcome == "wrong_answer" || outcome == "crash" || outcome == "timeout";
}

// One line on a failed child: its outcome and the first log line naming an error (else the first
// non-empty line), e.g. "compile_error: error: 'x' undeclared".
std::string summary(const proto::FailedChild& f) {
  std::string first, named;
  for (size_t pos = 0; pos < f.log.size() && named.empty();) {
    size_t end = f.log.find('\n', pos);
    if (end == std::string::npos) end = f.log.size();
    const std::string line = f.log.substr(pos, end - pos);
    if (first.empty() && line.find_first_not_of(" \t\r") != std::string::npos) first = line;
    if (line.find("error") != std::string::npos || line.find("mismatch") != std::string::npos) named = line;
    pos = end + 1;
  }
  const std::string line = named.empty() ? first : named;
  std::string s = (f.outcome.empty() ? "failed" : f.outcome) + (line.empty() ? "" : ": " + line);
  for (char& c : s) {
    if (static_cast<unsigned char>(c) < 0x20) c = ' ';
  }
  return s.substr(0, 240);
}

// The kind of a refusal for the statistics: its text up to the first quote or colon.
std::string reason_kind(const std::string& reason) {
  const size_t cut = reason.find_first_of("'\":");
  return reason.substr(0, std::min<size_t>(cut, 60));
}

}  // namespace

LlmProposer::LlmProposer(LlmConfig config, std::string targets_dir, uint64_t seed)
    : config_(std::move(config)),
      targets_dir_(std::move(targets_dir)),
      client_(config_),
      bandit_(model_names(config_), config_.min_cost_per_call_usd, seed) {}

Result<LlmProposer::PerTarget*> LlmProposer::target(const std::string& name, const std::string& backend) {
  const std::string key = name + "/" + backend;
  if (auto it = targets_.find(key); it != targets_.end()) return it->second.get();
  KILN_ASSIGN_OR_RETURN(TargetSpec spec, load_template_target(targets_dir_, name, backend));
  auto t = std::make_unique<PerTarget>();
  t->spec = std::move(spec);
  t->tmpl = &*t->spec.backend(backend)->tunable;
  return (targets_[key] = std::move(t)).get();
}

std::optional<std::pair<proto::FailedChild, uint32_t>> LlmProposer::learn(const proto::ProposeTask& task,
                                                                          PerTarget& t) {
  for (const proto::ParentInfo& p : task.parents) {
    const std::string key = novelty_key(p.source, space_params(*t.tmpl, p.params), task.backend);
    seen_.insert(key);
    if (auto it = known_.find(key); it != known_.end() && !it->second.judged) {
      it->second.judged = true;  // only kept children become parents
      bandit_.update(it->second.model, [](ModelStats& s) { ++s.accepted; });
    }
  }
  std::optional<std::pair<proto::FailedChild, uint32_t>> repair;
  for (const proto::FailedChild& f : task.failed_children) {
    const std::string key = novelty_key(f.source, space_params(*t.tmpl, f.params), task.backend);
    seen_.insert(key);
    uint32_t depth = 0;
    if (auto it = known_.find(key); it != known_.end()) {
      depth = it->second.repair_depth;
      if (!it->second.judged) {
        it->second.judged = true;
        bandit_.update(it->second.model, [](ModelStats& s) { ++s.failed; });
      }
    }
    if (!repaired_.insert(f.candidate_id).second) continue;  // handled in an earlier task
    t.failures.push_back(summary(f));
    while (t.failures.size() > config_.failures_shown) t.failures.pop_front();
    if (!repair && repairable(f.outcome) && depth < config_.repair_tries) repair.emplace(f, depth + 1);
  }
  return repair;
}

bool LlmProposer::budget_spent() const {
  std::lock_guard<std::mutex> lock(mu_);
  return (config_.budget_tokens > 0 && tokens_ >= config_.budget_tokens) ||
         (config_.budget_usd > 0 && cost_usd_ >= config_.budget_usd);
}

// What this answer cost on `model`, sent with it so the coordinator can count every agent's use.
static void note_usage(proto::Proposal& out, const std::string& model,
                       const Result<ChatReply>& reply) {
  auto it = std::find_if(out.usage.begin(), out.usage.end(),
                         [&](const auto& u) { return u.model == model; });
  if (it == out.usage.end()) it = out.usage.insert(out.usage.end(), proto::ModelUsage{model});
  ++it->calls;
  if (!reply.is_ok()) return;
  it->input_tokens +=
      static_cast<uint32_t>(std::min<uint64_t>(reply->input_tokens, UINT32_MAX - it->input_tokens));
  it->output_tokens += static_cast<uint32_t>(
      std::min<uint64_t>(reply->output_tokens, UINT32_MAX - it->output_tokens));
  it->cost_usd += reply->cost_usd;
}

void LlmProposer::charge(size_t model, const Result<ChatReply>& reply) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (reply.is_ok()) {
      tokens_ += reply->input_tokens + reply->output_tokens;
      cost_usd_ += reply->cost_usd;
    }
  }
  bandit_.update(model, [&](ModelStats& s) {
    if (!reply.is_ok()) {
      ++s.call_errors;
      return;
    }
    s.calls += reply->attempts;
    s.input_tokens += reply->input_tokens;
    s.output_tokens += reply->output_tokens;
    s.cost_usd += reply->cost_usd;
  });
}

proto::Proposal LlmProposer::answer(const proto::ProposeTask& task, Clock::time_point received,
                                    const std::atomic<bool>& cancel) {
  proto::Proposal out;
  out.task_id = task.task_id;
  out.target = task.target;
  const auto deadline = received + std::chrono::seconds(config_.task_deadline_s);
  PromptInput in;
  std::optional<std::pair<proto::FailedChild, uint32_t>> repair;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++tasks_;
    Result<PerTarget*> t = target(task.target, task.backend);
    if (!t.is_ok()) {
      ++failed_tasks_;
      out.error = t.status().message();
      return out;
    }
    if (task.parents.empty()) {
      ++failed_tasks_;
      out.error = "the task names no parent to propose from";
      return out;
    }
    repair = learn(task, **t);
    in.spec = &(*t)->spec;  // PerTarget objects live as long as the proposer
    in.tmpl = (*t)->tmpl;
    in.recent_failures.assign((*t)->failures.begin(), (*t)->failures.end());
  }
  in.backend = task.backend;
  in.parent = &task.parents.front();
  in.operator_hint = task.operator_hint;
  in.log_chars = config_.log_chars;
  for (const std::string& f : task.failure_logs) {
    if (in.recent_failures.size() >= config_.failures_shown + 4) break;
    in.recent_failures.push_back(f.substr(0, 240));
  }
  if (repair) in.repair = &repair->first;
  const std::map<std::string, std::string> base_params =
      space_params(*in.tmpl, repair ? repair->first.params : in.parent->params);

  std::string reason;    // why the task has no candidate yet (its error if it stays so)
  std::string refusal;   // why the last reply was refused, for the next prompt
  for (uint32_t ask = 0; ask < config_.asks_per_task && out.candidates.size() < std::max<uint32_t>(task.count, 1);
       ++ask) {
    if (cancel.load()) {
      reason = "stopped";
      break;
    }
    if (budget_spent()) {
      std::lock_guard<std::mutex> lock(mu_);
      ++budget_refusals_;
      reason = "the LLM budget is spent (" + std::to_string(tokens_) + " tokens, $" + std::to_string(cost_usd_) +
               "); no model is asked again";
      break;
    }
    if (Clock::now() >= deadline) {
      reason = reason.empty() ? "the task's deadline passed" : reason + "; then the task's deadline passed";
      break;
    }
    const size_t m = bandit_.pick();
    const ModelConfig& model = config_.models[m];
    in.previous_rejection = refusal;
    Result<ChatReply> reply = client_.complete(model, build_prompt(in), deadline, &cancel);
    charge(m, reply);
    note_usage(out, model.name, reply);
    if (!reply.is_ok()) {
      reason = "model call failed: " + reply.status().message();
      spdlog::info("task {}: {}", task.task_id, reason);
      const StatusCode code = reply.status().code();
      if (code == StatusCode::kDeadlineExceeded || code == StatusCode::kCancelled) break;
      continue;
    }
    Result<ParsedReply> parsed = parse_reply(reply->text, *in.spec, task.backend, *in.tmpl, base_params);
    if (!parsed.is_ok()) {
      refusal = parsed.status().message();
      reason = "reply refused: " + refusal;
      spdlog::info("task {} ({}): {}", task.task_id, model.name, reason);
      bandit_.update(m, [](ModelStats& s) { ++s.rejected; });
      std::lock_guard<std::mutex> lock(mu_);
      ++rejections_[reason_kind(parsed.status().message())];
      continue;
    }
    const std::string key = novelty_key(parsed->source, parsed->params, task.backend);
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!seen_.insert(key).second) {
        refusal = "the same kernel (up to whitespace and comments) as one already proposed or a parent";
        reason = "reply refused: " + refusal;
        bandit_.update(m, [](ModelStats& s) { ++s.duplicates; });
        ++rejections_["duplicate"];
        continue;
      }
      known_[key] = Known{m, repair ? repair->second : 0, false};
    }
    bandit_.update(m, [&](ModelStats& s) {
      ++s.proposals;
      if (repair) ++s.repairs;
    });
    proto::ProposedCandidate c;
    c.source = std::move(parsed->source);
    c.params = std::move(parsed->params);
    c.operator_name = repair ? "llm repair" : "llm rewrite";
    c.parent_id = in.parent->candidate_id;
    c.model = model.name;
    c.note = model.name + (repair ? " repairs " + repair->first.candidate_id.substr(0, 12) : std::string()) +
             (parsed->note.empty() ? "" : ": " + parsed->note);
    out.candidates.push_back(std::move(c));
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (out.candidates.empty()) {
    ++failed_tasks_;
    out.error = reason.empty() ? "no usable reply" : reason;
  } else {
    ++answered_;
  }
  return out;
}

nlohmann::json LlmProposer::stats() const {
  nlohmann::json j = bandit_.to_json();
  std::lock_guard<std::mutex> lock(mu_);
  j["tasks"] = tasks_;
  j["answered"] = answered_;
  j["failed_tasks"] = failed_tasks_;
  j["budget_refusals"] = budget_refusals_;
  j["tokens"] = tokens_;
  j["cost_usd"] = cost_usd_;
  j["rejections"] = rejections_;
  j["budget_spent"] = (config_.budget_tokens > 0 && tokens_ >= config_.budget_tokens) ||
                      (config_.budget_usd > 0 && cost_usd_ >= config_.budget_usd);
  return j;
}

}  // namespace kiln::agent::llm
