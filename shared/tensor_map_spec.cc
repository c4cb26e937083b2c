// Tensor maps: reading and checking target.json's "tensor_maps", evaluating them at a shape, and
// their wire form.
#include "shared/tensor_map_spec.h"

#include <set>
#include <type_traits>

#include "shared/expr.h"
#include "shared/json_fields.h"
#include "shared/target_spec.h"
#include "shared/text.h"

namespace kiln {
namespace {

constexpr size_t kMaxRank = 5;            // the driver's limit for tiled maps
constexpr int64_t kMaxBox = 256;          // elements per box dim
constexpr uint64_t kMaxDim = 1ull << 32;  // elements per tensor dim
constexpr uint64_t kMaxStride = 1ull << 40;

const TargetArg* find_tensor(const TargetSpec& target, const std::string& name, int* index) {
  int i = 0;
  for (const auto& a : target.args) {
    if (a.role == TargetArg::Role::kScalar) continue;
    if (a.name == name) {
      *index = i;
      return &a;
    }
    ++i;
  }
  return nullptr;
}

std::string map_label(const TensorMapSpec& m) { return "tensor map '" + m.name + "'"; }

}  // namespace

Status read_tensor_maps(JsonFields& f, std::vector<TensorMapSpec>* maps) {
  const nlohmann::json* list = f.raw("tensor_maps");
  if (list == nullptr) return Status::ok();
  if (!list->is_array()) return f.field_error("tensor_maps", "expected an array of objects");
  for (size_t i = 0; i < list->size(); ++i) {
    const std::string key = "tensor_maps[" + std::to_string(i) + "]";
    JsonFields m = f.nested((*list)[i], key);
    KILN_RETURN_IF_ERROR(m.status());
    TensorMapSpec spec;
    KILN_RETURN_IF_ERROR(m.get("name", &spec.name, true));
    KILN_RETURN_IF_ERROR(m.get("tensor", &spec.tensor, true));
    KILN_RETURN_IF_ERROR(m.get("box", &spec.box, true));
    KILN_RETURN_IF_ERROR(m.get("swizzle", &spec.swizzle));
    KILN_RETURN_IF_ERROR(m.get("when", &spec.when));
    KILN_RETURN_IF_ERROR(m.finish());
    maps->push_back(std::move(spec));
  }
  return Status::ok();
}

Status check_tensor_map_specs(const TargetSpec& target, const std::vector<TensorMapSpec>& maps,
                              const std::string& where) {
  std::set<std::string> names;
  for (const TensorMapSpec& m : maps) {
    const std::string at = where + ": " + map_label(m) + ": ";
    if (!is_identifier(m.name)) return invalid_argument(at + "the name is not an identifier");
    if (!names.insert(m.name).second) return invalid_argument(at + "a second map of this name");
    int index = 0;
    const TargetArg* arg = find_tensor(target, m.tensor, &index);
    if (arg == nullptr) {
      return invalid_argument(at + "'" + m.tensor + "' is not a tensor argument of the target");
    }
    if (m.box.size() != arg->shape.size() || m.box.empty() || m.box.size() > kMaxRank) {
      return invalid_argument(at + "'box' needs one size per dim of '" + m.tensor + "' (" +
                              std::to_string(arg->shape.size()) + ", at most " +
                              std::to_string(kMaxRank) + "), outermost first; got " +
                              std::to_string(m.box.size()));
    }
    if (m.swizzle != 0 && m.swizzle != 32 && m.swizzle != 64 && m.swizzle != 128) {
      return invalid_argument(at + "'swizzle' is 0, 32, 64 or 128 (bytes), not " +
                              std::to_string(m.swizzle));
    }
  }
  return Status::ok();
}

Result<bool> tensor_map_taken(const TensorMapSpec& m,
                              const std::map<std::string, std::string>& params, DType dtype) {
  Result<double> when = eval_expr(m.when, expr_vars({}, dtype, params));  // no dims, by design
  if (!when.is_ok()) {
    return invalid_argument(map_label(m) +
                            ": 'when' (of the parameters alone): " + when.status().message());
  }
  return *when != 0;
}

Result<std::vector<TensorMapArg>> tensor_maps_at(const TargetSpec& target,
                                                 const std::vector<TensorMapSpec>& maps,
                                                 const std::map<std::string, std::string>& params,
                                                 const std::map<std::string, int64_t>& shape,
                                                 DType dtype) {
  std::vector<TensorMapArg> out;
  const ExprVars vars = expr_vars(shape, dtype, params);
  for (const TensorMapSpec& m : maps) {
    const std::string label = map_label(m);
    KILN_ASSIGN_OR_RETURN(bool taken, tensor_map_taken(m, params, dtype));
    if (!taken) continue;
    TensorMapArg t;
    const TargetArg* arg = find_tensor(target, m.tensor, &t.tensor);
    if (arg == nullptr) return invalid_argument(label + ": no tensor '" + m.tensor + "'");
    t.dtype = arg->dtype == "T" ? dtype : parse_dtype(arg->dtype).value_or(dtype);
    t.swizzle = m.swizzle;
    const uint64_t elem = dtype_bytes(t.dtype);
    uint64_t stride = elem;
    for (size_t d = arg->shape.size(); d-- > 0;) {  // innermost first
      const auto size = static_cast<uint64_t>(shape.at(arg->shape[d]));
      if (d + 1 < arg->shape.size()) t.strides_bytes.push_back(stride);
      t.dims.push_back(size);
      if (size > kMaxDim) t.encodable = false;
      stride *= size;
      Result<int64_t> box = eval_int_expr(m.box[d], vars);
      if (!box.is_ok()) return invalid_argument(label + ": box: " + box.status().message());
      if (*box < 1 || *box > kMaxBox) {
        return invalid_argument(label + ": box size " + std::to_string(*box) + " of dim '" +
                                arg->shape[d] + "' is outside 1..256");
      }
      t.box.push_back(static_cast<uint32_t>(*box));
    }
    for (uint64_t s : t.strides_bytes) {
      if (s % 16 != 0 || s >= kMaxStride) t.encodable = false;
    }
    const uint64_t row = t.box[0] * elem;
    if (row % 16 != 0) {
      return invalid_argument(label + ": the innermost box row is " + std::to_string(row) +
                              " bytes; it must be a multiple of 16");
    }
    if (t.swizzle != 0 && row > static_cast<uint64_t>(t.swizzle)) {
      return invalid_argument(label + ": the innermost box row (" + std::to_string(row) +
                              " bytes) is wider than the " + std::to_string(t.swizzle) +
                              "-byte swizzle");
    }
    out.push_back(std::move(t));
  }
  return out;
}

nlohmann::json tensor_map_json(const TensorMapArg& m) {
  return {{"tmap",
           {{"tensor", m.tensor},
            {"dtype", std::string(dtype_name(m.dtype))},
            {"dims", m.dims},
            {"strides", m.strides_bytes},
            {"box", m.box},
            {"swizzle", m.swizzle},
            {"encodable", m.encodable}}}};
}

Result<TensorMapArg> tensor_map_from_json(const nlohmann::json& j) {
  JsonFields f(j, "launch argument", "tmap");
  KILN_RETURN_IF_ERROR(f.status());
  TensorMapArg m;
  std::string dtype;
  KILN_RETURN_IF_ERROR(f.get("tensor", &m.tensor, true));
  KILN_RETURN_IF_ERROR(f.get("dtype", &dtype, true));
  KILN_RETURN_IF_ERROR(f.get("swizzle", &m.swizzle, true));
  KILN_RETURN_IF_ERROR(f.get("encodable", &m.encodable, true));
  auto read_list = [&](const char* key, auto* v) -> Status {
    const nlohmann::json* list = f.raw(key);
    if (list == nullptr || !list->is_array()) return f.field_error(key, "expected an array");
    for (const auto& e : *list) {
      if (!e.is_number_unsigned()) return f.field_error(key, "expected unsigned integers");
      v->push_back(e.get<typename std::remove_pointer_t<decltype(v)>::value_type>());
    }
    return Status::ok();
  };
  KILN_RETURN_IF_ERROR(read_list("dims", &m.dims));
  KILN_RETURN_IF_ERROR(read_list("strides", &m.strides_bytes));
  KILN_RETURN_IF_ERROR(read_list("box", &m.box));
  KILN_RETURN_IF_ERROR(f.finish());
  Result<DType> d = parse_dtype(dtype);
  if (!d.is_ok()) return f.field_error("dtype", d.status().message());
  m.dtype = *d;
  if (m.tensor < 0) return f.field_error("tensor", "must be >= 0");
  if (m.dims.empty() || m.dims.size() > kMaxRank || m.box.size() != m.dims.size() ||
      m.strides_bytes.size() + 1 != m.dims.size()) {
    return invalid_argument(
        "tmap: need 1 to 5 dims, as many box sizes, and one stride fewer than dims");
  }
  for (size_t i = 0; i < m.dims.size(); ++i) {
    if (m.dims[i] == 0 || m.box[i] == 0 || m.box[i] > kMaxBox) {
      return invalid_argument("tmap: dims must be positive and box sizes in 1..256");
    }
  }
  if (m.swizzle != 0 && m.swizzle != 32 && m.swizzle != 64 && m.swizzle != 128) {
    return invalid_argument("tmap: swizzle is 0, 32, 64 or 128");
  }
  return m;
}

}  // namespace kiln
