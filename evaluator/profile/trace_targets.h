// Which of kiln's target types a kernel of a real program belongs to, from its name: the
// patterns are the names cuBLAS, CUTLASS, cuDNN, FlashAttention and PyTorch's ATen give their
// kernels (documented in docs/profile.md). A name matching nothing is "unmapped" ("").
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace kiln::profile {

// One rule: a target and the lowercase fragments that select it. `substrings` match anywhere in
// the lowercase name; `words` match a whole word (split at anything but letters and digits, so
// "rope" matches "apply_rope_kernel" but not "property").
struct TargetPattern {
  const char* target;
  std::vector<std::string_view> substrings;
  std::vector<std::string_view> words;
  const char* note;  // how good the match is, for docs and the table
};

// The rules, first match wins (attention before gemm: FlashAttention kernels are CUTLASS code).
const std::vector<TargetPattern>& target_patterns();

// The target type of a kernel name, or "" when no rule matches.
std::string map_kernel_to_target(std::string_view kernel_name);

// The target type of one launch: the operator of the innermost NVTX range it ran in where that
// operator is one a target computes (op_shapes.h, target_of_range), else its kernel's name.
std::string map_launch_to_target(std::string_view kernel_name, std::string_view range);

}  // namespace kiln::profile
