// Tensor maps in an exported launcher: see tensor_map_export.h.
#include "export/tensor_map_export.h"

#include "export/source_export.h"
#include "shared/tensor_map_spec.h"

namespace kiln::exporter {
namespace {

const char* data_type(DType d) {
  switch (d) {
    case DType::kF16:
      return "CU_TENSOR_MAP_DATA_TYPE_FLOAT16";
    case DType::kBF16:
      return "CU_TENSOR_MAP_DATA_TYPE_BFLOAT16";
    case DType::kF32:
      return "CU_TENSOR_MAP_DATA_TYPE_FLOAT32";
    case DType::kF64:
      return "CU_TENSOR_MAP_DATA_TYPE_FLOAT64";
    case DType::kI32:
      return "CU_TENSOR_MAP_DATA_TYPE_INT32";
    case DType::kI64:
      return "CU_TENSOR_MAP_DATA_TYPE_INT64";
  }
  return "CU_TENSOR_MAP_DATA_TYPE_FLOAT16";
}

const char* swizzle(int bytes) {
  switch (bytes) {
    case 32:
      return "CU_TENSOR_MAP_SWIZZLE_32B";
    case 64:
      return "CU_TENSOR_MAP_SWIZZLE_64B";
    case 128:
      return "CU_TENSOR_MAP_SWIZZLE_128B";
    default:
      return "CU_TENSOR_MAP_SWIZZLE_NONE";
  }
}

constexpr const char* kHelpers = R"(
// ---- tensor maps: cuTensorMapEncodeTiled through the runtime (no libcuda link) ----
#include <cuda.h>
#include <cstring>
namespace {
using KilnEncodeTiled = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*,
                                     const cuuint64_t*, const cuuint64_t*, const cuuint32_t*,
                                     const cuuint32_t*, CUtensorMapInterleave, CUtensorMapSwizzle,
                                     CUtensorMapL2promotion, CUtensorMapFloatOOBfill);
KilnEncodeTiled kiln_tensor_map_encoder() {
  static const KilnEncodeTiled encode = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
#if CUDART_VERSION >= 12050
    const cudaError_t e = cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000,
                                                           cudaEnableDefault, &found);
#else
    const cudaError_t e = cudaGetDriverEntryPoint("cuTensorMapEncodeTiled", &fn,
                                                  cudaEnableDefault, &found);
#endif
    return e == cudaSuccess && found == cudaDriverEntryPointSuccess
               ? reinterpret_cast<KilnEncodeTiled>(fn)
               : nullptr;
  }();
  return encode;
}
}  // namespace
)";

}  // namespace

Result<TensorMapCode> tensor_map_code(const ExportCandidate& c, const CppNames& names) {
  TensorMapCode out;
  const KernelSpec& k = c.geometry();
  if (k.tensor_maps.empty() || c.backend != "cuda") return out;
  std::string shape_call = "shape_text(";
  for (size_t i = 0; i < c.target.dims.size(); ++i)
    shape_call += (i ? ", " : "") + code_name(c.target.dims[i]);
  shape_call += ")";
  const std::vector<LaunchArg> args = launch_args(c);
  for (const TensorMapSpec& m : k.tensor_maps) {
    KILN_ASSIGN_OR_RETURN(bool taken, tensor_map_taken(m, c.params, c.dtype));
    if (!taken) continue;
    const LaunchArg* tensor = nullptr;
    for (const LaunchArg& a : args) {
      if (a.spec_name == m.tensor && a.kind != LaunchArg::Kind::kDim &&
          a.kind != LaunchArg::Kind::kScalar)
        tensor = &a;
    }
    if (tensor == nullptr || tensor->shape.size() != m.box.size()) {
      return invalid_argument("tensor map '" + m.name + "': no tensor '" + m.tensor +
                              "' of its box's rank");
    }
    const size_t rank = tensor->shape.size();
    const std::string var = "map_" + m.name, label = "tensor map '" + m.name + "'";
    const std::string elem = std::to_string(dtype_bytes(tensor->dtype));
    std::string e = "  // " + label + " over " + tensor->name + "\n";
    e += "  kiln_tensor_map " + var + ";\n  std::memset(&" + var + ", 0, sizeof " + var + ");\n";
    e += "  {\n    const cuuint64_t dims[] = {";
    for (size_t i = 0; i < rank; ++i)  // innermost first
      e += (i ? ", " : "") + std::string("static_cast<cuuint64_t>(") + tensor->shape[rank - 1 - i] +
           ")";
    e += "};\n";
    e += "    cuuint64_t strides[" + std::to_string(rank) + "] = {};  // bytes, dims 1..\n";
    e += "    for (int i = 1; i < " + std::to_string(rank) + "; ++i)\n";
    e += "      strides[i - 1] = (i == 1 ? " + elem + "ull : strides[i - 2]) * dims[i - 1];\n";
    e += "    const double box_d[] = {";
    for (size_t i = 0; i < rank; ++i) {
      KILN_ASSIGN_OR_RETURN(std::string b, expr_to_cpp(m.box[rank - 1 - i], names));
      e += (i ? ", " : "") + b;
    }
    e += "};\n";
    e += "    cuuint32_t box[" + std::to_string(rank) + "], ones[" + std::to_string(rank) + "];\n";
    e += "    bool encodable = true;  // else zeros: the kernel takes its other path there\n";
    e += "    for (int i = 0; i < " + std::to_string(rank) + "; ++i) {\n";
    e += "      if (!whole(box_d[i], 1, 256)) {\n";
    e += "        if (why) *why = \"" + label + ": a box size is outside 1..256 at \" + " +
         shape_call + ";\n        return cudaErrorInvalidValue;\n      }\n";
    e += "      box[i] = static_cast<cuuint32_t>(box_d[i]);\n      ones[i] = 1;\n";
    e += "      if (dims[i] > (1ull << 32)) encodable = false;\n";
    e += "      if (i + 1 < " + std::to_string(rank) +
         " && (strides[i] % 16 != 0 || strides[i] >= (1ull << 40))) encodable = false;\n    }\n";
    e += "    if (encodable) {\n      const KilnEncodeTiled encode = kiln_tensor_map_encoder();\n";
    e += "      if (encode == nullptr) {\n        if (why) *why = \"cuTensorMapEncodeTiled cannot "
         "be reached through the CUDA runtime (a driver before CUDA 12?)\";\n"
         "        return cudaErrorNotSupported;\n      }\n";
    e += "      const CUresult r = encode(reinterpret_cast<CUtensorMap*>(&" + var + "), " +
         data_type(tensor->dtype) + ", " + std::to_string(rank) +
         ", const_cast<void*>(static_cast<const void*>(" + tensor->name + ")), dims, " +
         (rank > 1 ? "strides" : "nullptr") + ", box, ones, CU_TENSOR_MAP_INTERLEAVE_NONE, " +
         swizzle(m.swizzle) +
         ", CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);\n";
    e += "      if (r != CUDA_SUCCESS) {\n        if (why) *why = \"cuTensorMapEncodeTiled "
         "refused " +
         label + " (CUresult \" + std::to_string(static_cast<int>(r)) + \") at \" + " + shape_call +
         ";\n        return cudaErrorInvalidValue;\n      }\n    }\n  }\n";
    out.encode += e;
    out.args.push_back(var);
  }
  if (!out.args.empty()) {
    out.helpers = kHelpers;
    out.encode =
        "  static_assert(sizeof(kiln_tensor_map) == sizeof(CUtensorMap), \"128 bytes\");\n" +
        out.encode;
  }
  return out;
}

}  // namespace kiln::exporter
