// Prompts for the LLM proposer and the parsing of its replies.
//
// A prompt carries the target's description and contract (entry point and its signature, the
// template's parameters with their values, constraints and launch geometry as expressions of
// them), the parent's source, parameters, time and profile (metrics, `prof.*` entries and the
// bottleneck class when the evaluator measured them), the playbook tier to work on, and short
// summaries of recent failures. A repair prompt adds the failed child's source and log.
//
// The reply format, stated in every prompt:
//   ```cuda            (```cpp on the cpu backend)
//   <the complete kernel source>
//   ```
//   ```json
//   {"params": {"BLOCK": 256, ...}, "note": "one line on what changed and why"}
//   ```
// The json block is optional: parameters it leaves out keep the parent's values. A reply is
// rejected (with the reason) when it has no code block, the code does not define the entry point,
// is larger than the limit, or names a parameter the template does not have, a value that is not
// an integer, or a configuration that breaks the constraints.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "agent/llm/llm_client.h"
#include "shared/protocol.h"
#include "shared/status.h"
#include "shared/target_spec.h"

namespace kiln::agent::llm {

inline constexpr size_t kMaxSourceBytes = 256 * 1024;

struct PromptInput {
  const TargetSpec* spec = nullptr;
  std::string backend;
  const KernelSpec* tmpl = nullptr;          // the template whose contract candidates keep
  const proto::ParentInfo* parent = nullptr;
  std::string operator_hint;                 // playbook tier, e.g. "memory access"
  std::vector<std::string> recent_failures;  // one short line each
  std::string previous_rejection;            // why this task's last reply was refused
  const proto::FailedChild* repair = nullptr;  // set: a repair prompt
  size_t log_chars = 6000;
};

ChatRequest build_prompt(const PromptInput& in);

// The entry point's declaration as the backend calls it (docs/targets.md "Calling convention"); for
// triton the @triton.jit function's line, with the constexprs of `tmpl` (when given).
std::string entry_signature(const TargetSpec& spec, const std::string& backend,
                            const std::string& kernel, const KernelSpec* tmpl = nullptr);

struct ParsedReply {
  std::string source;
  std::map<std::string, std::string> params;  // every template parameter, as decimal text
  std::string note;
};

// Validates a reply against the template's contract; the error says why it was refused.
Result<ParsedReply> parse_reply(const std::string& text, const TargetSpec& spec, const std::string& backend,
                                const KernelSpec& tmpl, const std::map<std::string, std::string>& parent_params);

// Source text up to comments and whitespace: comments removed, whitespace runs collapsed, and no
// whitespace kept next to punctuation. Two sources with the same normal form are the same kernel.
// For triton (Python, where indentation is syntax and // divides) only # comments, trailing
// whitespace and blank lines are dropped.
std::string normal_form(const std::string& source, const std::string& backend = "cuda");

// Key of a candidate for novelty: hash of normal_form(source, backend) and the parameters.
std::string novelty_key(const std::string& source, const std::map<std::string, std::string>& params,
                        const std::string& backend = "cuda");

}  // namespace kiln::agent::llm
