// The small Triton kernel the triton backend's tests compile (tests/evaluator) and launch
// (tests/gpu): out = x + y over N elements, BLOCK per program, masked at the end.
#pragma once

#include <vector>

#include "evaluator/backend.h"

namespace kiln::testing {

inline constexpr const char* kTritonAddKernel = R"(import triton
import triton.language as tl


@triton.jit
def add(x, y, out, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < N
    tl.store(out + offs, tl.load(x + offs, mask=m) + tl.load(y + offs, mask=m), mask=m)
)";

// The arguments kiln passes to `add` in dtype `d`: x, y, out, N.
inline std::vector<eval::ArgSpec> triton_add_signature(DType d) {
  return {{eval::ArgSpec::Kind::kTensorIn, d, "x"},
          {eval::ArgSpec::Kind::kTensorIn, d, "y"},
          {eval::ArgSpec::Kind::kTensorOut, d, "out"},
          {eval::ArgSpec::Kind::kInt64, DType::kI64, "N"}};
}

}  // namespace kiln::testing
