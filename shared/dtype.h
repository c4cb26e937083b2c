// Element types kiln knows, with the names target specs use ("f16", "bf16", "f32", ...).
#pragma once

#include <cstddef>
#include <string_view>

#include "shared/status.h"

namespace kiln {

enum class DType { kF16, kBF16, kF32, kF64, kI32, kI64 };

std::string_view dtype_name(DType t);
Result<DType> parse_dtype(std::string_view name);
size_t dtype_bytes(DType t);
bool dtype_is_float(DType t);

}  // namespace kiln
