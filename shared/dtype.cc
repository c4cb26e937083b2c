// Names and sizes of kiln's element types.
#include "shared/dtype.h"

#include <string>

namespace kiln {

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::kF16: return "f16";
    case DType::kBF16: return "bf16";
    case DType::kF32: return "f32";
    case DType::kF64: return "f64";
    case DType::kI32: return "i32";
    case DType::kI64: return "i64";
  }
  return "?";
}

Result<DType> parse_dtype(std::string_view name) {
  for (DType t : {DType::kF16, DType::kBF16, DType::kF32, DType::kF64, DType::kI32, DType::kI64}) {
    if (dtype_name(t) == name) return t;
  }
  return invalid_argument("unknown dtype '" + std::string(name) +
                          "' (use f16, bf16, f32, f64, i32 or i64)");
}

size_t dtype_bytes(DType t) {
  switch (t) {
    case DType::kF16:
    case DType::kBF16: return 2;
    case DType::kF32:
    case DType::kI32: return 4;
    case DType::kF64:
    case DType::kI64: return 8;
  }
  return 0;
}

bool dtype_is_float(DType t) { return t != DType::kI32 && t != DType::kI64; }

}  // namespace kiln
