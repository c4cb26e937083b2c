// Tensor maps (TMA descriptors) a cuda kernel of a target declares over its tensor arguments
// (docs/targets.md, "Tensor maps"): what target.json says, and the map a launch gets at one shape
// with one configuration -- everything cuTensorMapEncodeTiled needs except the address, which
// only the sandbox child knows.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "shared/dtype.h"
#include "shared/status.h"

namespace kiln {

class JsonFields;
struct TargetSpec;

// One entry of a kernel's "tensor_maps" list. The maps whose `when` holds are passed after the
// scalars, in list order, each as a 128-byte `const __grid_constant__ kiln_tensor_map` parameter.
struct TensorMapSpec {
  std::string name;              // for messages ("tensor map 'a_tiles'")
  std::string tensor;            // an input, output or scratch argument of the target
  std::vector<std::string> box;  // box size per dim of the tensor, outermost first: expressions
                                 // of the dims, the parameters and S (element bytes)
  int swizzle = 0;               // shared-memory swizzle: 0 (none), 32, 64 or 128 bytes
  std::string when = "1";        // an expression of the parameters (and S) alone: whether the
                                 // kernel takes this map (e.g. "IMPL == 2")
};

// Reads a kernel's "tensor_maps" array (absent: none) from `f`; errors name the field.
Status read_tensor_maps(JsonFields& f, std::vector<TensorMapSpec>* maps);

// Checks a kernel's maps against the target: each names a tensor argument, has one box size per
// dim of it (at most 5), a known swizzle and a unique name. `where` prefixes errors.
Status check_tensor_map_specs(const TargetSpec& target, const std::vector<TensorMapSpec>& maps,
                              const std::string& where);

// A map as one launch gets it. Dims innermost first, as the driver takes them.
struct TensorMapArg {
  int tensor = 0;                       // index among the target's tensor arguments
  DType dtype = DType::kF16;            // element type
  std::vector<uint64_t> dims;           // elements per dim, innermost first
  std::vector<uint64_t> strides_bytes;  // byte stride of dims 1.. (rank - 1 values)
  std::vector<uint32_t> box;            // innermost first
  int swizzle = 0;
  // False where this shape's layout cannot be encoded (a row pitch that is not a multiple of 16
  // bytes, a dim over 2^32): the kernel then gets 128 zero bytes and must take another path
  // there (it sees the same dims).
  bool encodable = true;
};

// Whether a kernel with `params` takes map `m` (its `when`, over the parameters and S alone); an
// error names the map.
Result<bool> tensor_map_taken(const TensorMapSpec& m,
                              const std::map<std::string, std::string>& params, DType dtype);

// The maps a kernel with `params` takes at `shape` and `dtype` (those whose `when` holds). A box
// the hardware cannot take (a size outside 1..256, an innermost box row that is not a multiple of
// 16 bytes or is wider than the swizzle) is an error of the configuration, naming the map.
Result<std::vector<TensorMapArg>> tensor_maps_at(const TargetSpec& target,
                                                 const std::vector<TensorMapSpec>& maps,
                                                 const std::map<std::string, std::string>& params,
                                                 const std::map<std::string, int64_t>& shape,
                                                 DType dtype);

// The wire form between the evaluator and its sandbox child: {"tmap": {...}} in a launch's args.
nlohmann::json tensor_map_json(const TensorMapArg& map);
Result<TensorMapArg> tensor_map_from_json(const nlohmann::json& j);

}  // namespace kiln
