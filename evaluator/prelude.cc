// Prelude texts for the cuda and cpu backends.
#include "evaluator/prelude.h"

namespace kiln::eval {
namespace {

constexpr const char* kCudaPrelude = R"(// kiln prelude (cuda)
#include <cuda_fp16.h>
#include <cuda_bf16.h>
typedef KILN_DTYPE T;
// A tensor map parameter (target.json "tensor_maps"): const __grid_constant__ kiln_tensor_map.
struct __align__(64) kiln_tensor_map { unsigned long long opaque[16]; };
static __device__ __forceinline__ float to_f32(float x) { return x; }
static __device__ __forceinline__ float to_f32(__half x) { return __half2float(x); }
static __device__ __forceinline__ float to_f32(__nv_bfloat16 x) { return __bfloat162float(x); }
template <typename U> __device__ __forceinline__ U from_f32(float x);
template <> __device__ __forceinline__ float from_f32<float>(float x) { return x; }
template <> __device__ __forceinline__ __half from_f32<__half>(float x) { return __float2half_rn(x); }
template <> __device__ __forceinline__ __nv_bfloat16 from_f32<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}
)";

constexpr const char* kCpuPrelude = R"(// kiln prelude (cpu)
#include <cstdint>
typedef KILN_DTYPE T;
static inline float to_f32(T x) { return static_cast<float>(x); }
template <typename U> static inline U from_f32(float x) { return static_cast<U>(x); }
)";

}  // namespace

std::string with_prelude(const std::string& backend, const std::string& source) {
  if (backend == "triton") return source;  // Python: the element types come with the pointers
  return std::string(backend == "cuda" ? kCudaPrelude : kCpuPrelude) + "#line 1\n" + source;
}

Result<std::string> dtype_macro(const std::string& backend, DType dtype) {
  if (backend == "cuda") {
    switch (dtype) {
      case DType::kF16: return std::string("__half");
      case DType::kBF16: return std::string("__nv_bfloat16");
      case DType::kF32: return std::string("float");
      case DType::kF64: return std::string("double");
      default: break;
    }
  } else if (backend == "triton") {  // Triton's names, also of its pointer types ("*fp16")
    switch (dtype) {
      case DType::kF16:
        return std::string("fp16");
      case DType::kBF16:
        return std::string("bf16");
      case DType::kF32:
        return std::string("fp32");
      case DType::kF64:
        return std::string("fp64");
      case DType::kI32:
        return std::string("i32");
      case DType::kI64:
        return std::string("i64");
    }
  } else if (backend == "cpu") {
    switch (dtype) {
      case DType::kF16: return std::string("_Float16");
      case DType::kF32: return std::string("float");
      case DType::kF64: return std::string("double");
      default: break;
    }
  }
  return unimplemented("the " + backend + " backend has no element type for " +
                       std::string(dtype_name(dtype)));
}

}  // namespace kiln::eval
