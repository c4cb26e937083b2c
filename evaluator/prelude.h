// The prelude kiln puts before every candidate's source: the element type T of the dtype under
// test and conversion helpers (to_f32, from_f32<T>), so one kernel text serves f16, bf16 and f32.
// Documented for kernel authors in docs/targets.md.
#pragma once

#include <string>

#include "shared/dtype.h"
#include "shared/status.h"

namespace kiln::eval {

// The source to compile: prelude for `backend` + "#line 1" + the candidate's text, so compiler
// messages point at the candidate's own lines (triton: the source as it is).
std::string with_prelude(const std::string& backend, const std::string& source);

// The value of the KILN_DTYPE macro for `dtype` on `backend` ("__half", "__nv_bfloat16", "float",
// "_Float16"; triton: Triton's names, "fp16", "bf16", "fp32", ...); an error for a dtype the
// backend cannot express.
Result<std::string> dtype_macro(const std::string& backend, DType dtype);

}  // namespace kiln::eval
