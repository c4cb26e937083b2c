// Kernel-name rules for `kiln profile`'s mapping to target types (see trace_targets.h). Only the
// name is known, so the rules are heuristics; the order settles names that match several (a
// log-softmax is cross_entropy, not softmax; cuBLAS's split-K reduction is matmul, not reduce).
#include "evaluator/profile/trace_targets.h"

#include <algorithm>
#include <cctype>

#include "evaluator/profile/op_shapes.h"

namespace kiln::profile {

const std::vector<TargetPattern>& target_patterns() {
  static const std::vector<TargetPattern> kPatterns = {
      {"flash_attention", {"flash", "fmha", "attention", "attn", "sdpa"}, {"mha"},
       "fused attention (FlashAttention, memory-efficient attention, cuDNN SDPA)"},
      {"cross_entropy", {"cross_entropy", "crossentropy", "nll_loss", "nllloss", "log_softmax",
                         "logsoftmax"}, {},
       "loss kernels, log-softmax included"},
      {"softmax", {"softmax"}, {}, "softmax forward and backward"},
      {"rmsnorm", {"rms_norm", "rmsnorm"}, {}, "RMSNorm forward and backward"},
      {"layernorm", {"layer_norm", "layernorm", "gammabetabackward"}, {},
       "LayerNorm forward and backward (ATen's GammaBetaBackward is its weight gradient)"},
      {"rotary_embedding", {"rotary"}, {"rope"}, "rotary position embedding"},
      {"matmul", {"gemm", "gemv", "matmul", "cutlass", "cublas", "xmma", "nvjet"}, {},
       "GEMMs from cuBLAS/cuBLASLt (nvjet, xmma), CUTLASS and Triton matmuls"},
      {"fused_mlp", {"silu", "swiglu", "swish", "gelu"}, {"glu"},
       "the MLP's elementwise activation only; kiln's fused_mlp also fuses the gate multiply"},
      {"reduce", {"reduce", "reduction"}, {"sum"}, "reductions (sum, mean, norms)"},
  };
  return kPatterns;
}

namespace {

bool has_word(const std::string& lower, std::string_view word) {
  for (size_t pos = lower.find(word); pos != std::string::npos; pos = lower.find(word, pos + 1)) {
    const bool left_ok = pos == 0 || !std::isalnum(static_cast<unsigned char>(lower[pos - 1]));
    const size_t end = pos + word.size();
    const bool right_ok = end == lower.size() || !std::isalnum(static_cast<unsigned char>(lower[end]));
    if (left_ok && right_ok) return true;
  }
  return false;
}

}  // namespace

std::string map_kernel_to_target(std::string_view kernel_name) {
  std::string lower(kernel_name);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  for (const TargetPattern& p : target_patterns()) {
    for (std::string_view s : p.substrings) {
      if (lower.find(s) != std::string::npos) return p.target;
    }
    for (std::string_view w : p.words) {
      if (has_word(lower, w)) return p.target;
    }
  }
  return "";
}

std::string map_launch_to_target(std::string_view kernel_name, std::string_view range) {
  std::string by_operator = range.empty() ? "" : target_of_range(range);
  return by_operator.empty() ? map_kernel_to_target(kernel_name) : by_operator;
}

}  // namespace kiln::profile
