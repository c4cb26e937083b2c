// The profile phase of an evaluation: after timing, the kernel runs once more on the timing inputs
// in the sandbox child, which reads its function attributes and (through CUPTI, where present and
// permitted) its hardware counters; the reply is checked and folded into the result with the
// bottleneck class (evaluator/profile/). A profile is information, never a verdict.
#include <spdlog/spdlog.h>

#include "evaluator/evaluation_internal.h"
#include "evaluator/profile/profile_reply.h"

namespace kiln::eval {

void CandidateEvaluator::Impl::profile_phase(KernelHandle handle, const LaunchGeometry& geometry,
                                             const nlohmann::json& args,
                                             const nlohmann::json& tensors,
                                             proto::EvaluationResult* r,
                                             const std::function<void(const std::string&)>& say,
                                             bool has_progress) {
  nlohmann::json req = geometry_json(geometry);
  req.update({{"op", "profile"},
              {"handle", handle},
              {"args", args},
              {"tensors", tensors},
              {"poison", kPoisonA}});
  // Kernel replay runs the kernel once per pass (a handful) and saves/restores its memory.
  Result<nlohmann::json> reply = sandbox->call(req, options.phase_timeout_ms);
  std::string failure;
  if (!reply.is_ok()) {
    failure = reply.status().message();
  } else if (!reply->value("ok", false)) {
    failure = reply->value("error", std::string("the sandbox reported a failure"));
    if (reply->value("fatal", false)) sandbox->kill_child();  // respawned for the next candidate
  }
  if (!failure.empty()) {
    r->profile_note = "no profile: " + failure;
    say("profile: none (" + failure + ")");
    return;
  }
  const profile::Roofline roofline =
      profile::roofline_from(r->metrics, options.bandwidth_bytes_per_s, options.matrix_flops_per_s);
  Result<std::string> notice = profile::apply_profile_reply(*reply, roofline, r);
  if (!notice.is_ok()) {
    r->profile_note = "no profile: " + notice.status().message();
    say("profile: none (" + notice.status().message() + ")");
    return;
  }
  for (const std::string& line : profile::profile_lines(*r)) {
    if (line.rfind("notice: ", 0) == 0) continue;  // said once below, not per candidate
    say(line);
  }
  if (!notice->empty() && !profile_notice_said) {
    profile_notice_said = true;
    // Where nobody reads progress (the evaluator daemon), the log carries it.
    if (has_progress)
      say("profile notice: " + *notice);
    else
      spdlog::warn("profile: {}", *notice);
  }
}

}  // namespace kiln::eval
