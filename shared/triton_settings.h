// Triton's launch settings: the template parameters of a Triton kernel that are not constexprs of
// the @triton.jit function but options of the compile (num_warps, num_stages), with Triton's own
// defaults. One place for the target spec's checks, the compile worker's request and the LLM
// prompt (docs/targets.md, "Triton kernels").
#pragma once

#include <string_view>

namespace kiln {

inline constexpr int kTritonDefaultWarps = 4;   // Triton's num_warps when none is given
inline constexpr int kTritonDefaultStages = 3;  // Triton's num_stages when none is given

// Whether a template parameter or define named `name` is a launch setting (num_warps,
// num_stages) rather than a constexpr argument of the kernel.
inline bool is_triton_launch_setting(std::string_view name) {
  return name == "num_warps" || name == "num_stages";
}

// A program's threads for `num_warps` warps: a Triton target's block is this, for every num_warps.
inline constexpr long long triton_block_threads(long long num_warps) { return 32 * num_warps; }

}  // namespace kiln
