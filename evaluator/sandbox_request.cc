// Reading the sandbox child's requests: launch fields, tensor lists and "time" options, each
// error naming the request and the field.
#include "evaluator/sandbox_request.h"

#include <cmath>

#include "shared/tensor_map_spec.h"

namespace kiln::eval {
namespace {

using nlohmann::json;

Status get_dim3(JsonFields& fields, const std::string& key, uint32_t out[3]) {
  const json* v = fields.raw(key);
  if (v == nullptr) return fields.field_error(key, "missing (required)");
  if (!v->is_array() || v->size() != 3) return fields.field_error(key, "expected [x, y, z]");
  for (size_t i = 0; i < 3; ++i) {
    const json& d = (*v)[i];
    if (!d.is_number_integer() || d.get<int64_t>() < 1 || d.get<int64_t>() > UINT32_MAX) {
      return fields.field_error(key, "expected three integers in [1, 2^32)");
    }
    out[i] = static_cast<uint32_t>(d.get<int64_t>());
  }
  return Status::ok();
}

}  // namespace

Result<LaunchFields> parse_launch(JsonFields& fields) {
  LaunchFields launch;
  int64_t handle = -1;
  KILN_RETURN_IF_ERROR(fields.get("handle", &handle, true));
  launch.handle = static_cast<KernelHandle>(handle);
  KILN_RETURN_IF_ERROR(get_dim3(fields, "grid", launch.geometry.grid));
  KILN_RETURN_IF_ERROR(get_dim3(fields, "block", launch.geometry.block));
  KILN_RETURN_IF_ERROR(fields.get("shared_bytes", &launch.geometry.shared_bytes));
  int poison = 0xFF;
  KILN_RETURN_IF_ERROR(fields.get("poison", &poison));
  if (poison < 0 || poison > 255) return fields.field_error("poison", "expected a byte (0..255)");
  launch.poison = static_cast<unsigned char>(poison);
  const json* args = fields.raw("args");
  if (args == nullptr || !args->is_array()) return fields.field_error("args", "expected an array");
  for (size_t i = 0; i < args->size(); ++i) {
    const json& a = (*args)[i];
    const std::string key = "args[" + std::to_string(i) + "]";
    if (a.is_object() && a.size() == 1 && a.contains("tmap")) {
      Result<TensorMapArg> map = tensor_map_from_json(a["tmap"]);
      if (!map.is_ok()) return fields.field_error(key, map.status().message());
      launch.args.push_back(a);
      continue;
    }
    bool valid = a.is_object() && a.size() == 1 &&
                 ((a.contains("tensor") && a["tensor"].is_number_unsigned()) ||
                  (a.contains("i64") && a["i64"].is_number_integer()) ||
                  (a.contains("f32") && a["f32"].is_number()));
    if (!valid) {
      return fields.field_error(
          key, "expected {\"tensor\": i}, {\"i64\": v}, {\"f32\": v} or {\"tmap\": {...}}");
    }
    launch.args.push_back(a);
  }
  return launch;
}

Result<std::vector<TensorLayout>> parse_tensors(const json& list, const std::string& source,
                                                const std::string& path, const Arena& arena,
                                                bool after_required) {
  if (!list.is_array()) {
    return invalid_argument(source + ": field '" + path + "': expected an array");
  }
  std::vector<TensorLayout> tensors;
  for (size_t i = 0; i < list.size(); ++i) {
    std::string where = path + "[" + std::to_string(i) + "]";
    JsonFields t(list[i], source, where);
    KILN_RETURN_IF_ERROR(t.status());
    TensorLayout layout;
    int64_t offset = -1, bytes = -1, after = -1;
    KILN_RETURN_IF_ERROR(t.get("offset", &offset, true));
    KILN_RETURN_IF_ERROR(t.get("bytes", &bytes, true));
    KILN_RETURN_IF_ERROR(t.get("out", &layout.out, true));
    KILN_RETURN_IF_ERROR(t.get("scratch", &layout.scratch));
    if (layout.scratch && layout.out) return t.field_error("scratch", "a scratch tensor is not an output");
    KILN_RETURN_IF_ERROR(t.get("after", &after, !layout.out && !layout.scratch && after_required));
    KILN_RETURN_IF_ERROR(t.finish());
    if (layout.scratch && after >= 0) return t.field_error("after", "a scratch tensor is not copied back");
    if (offset < 0 || bytes < 0) return t.field_error("offset", "offset and bytes must be >= 0");
    layout.offset = static_cast<uint64_t>(offset);
    layout.bytes = static_cast<uint64_t>(bytes);
    KILN_RETURN_IF_ERROR(arena.check_range(layout.offset, layout.bytes, source + " " + where));
    if (after >= 0 && !layout.out) {
      layout.after = static_cast<uint64_t>(after);
      KILN_RETURN_IF_ERROR(arena.check_range(*layout.after, layout.bytes,
                                             source + " " + where + ".after"));
    }
    tensors.push_back(layout);
  }
  return tensors;
}

Result<TimeRequest> parse_time_request(JsonFields& f, const Arena& arena) {
  TimeRequest t;
  KILN_ASSIGN_OR_RETURN(t.launch, parse_launch(f));
  KILN_RETURN_IF_ERROR(f.get("warmup", &t.warmup));
  KILN_RETURN_IF_ERROR(f.get("min_samples", &t.min_samples));
  KILN_RETURN_IF_ERROR(f.get("max_samples", &t.max_samples));
  KILN_RETURN_IF_ERROR(f.get("max_ms", &t.max_ms));
  KILN_RETURN_IF_ERROR(f.get("target_noise_rel", &t.target_noise_rel));
  KILN_RETURN_IF_ERROR(f.get("flush_l2", &t.flush_l2));
  KILN_RETURN_IF_ERROR(f.get("rotate_contents", &t.rotate_contents));
  KILN_RETURN_IF_ERROR(f.get("early_stop_us", &t.early_stop_us));
  if (t.warmup < 0 || t.min_samples < 1 || t.max_samples < t.min_samples || t.max_ms <= 0 ||
      !(t.early_stop_us >= 0) || !std::isfinite(t.early_stop_us)) {
    return invalid_argument(
        "request 'time': need warmup >= 0, 1 <= min_samples <= max_samples, "
        "max_ms > 0 and a finite early_stop_us >= 0");
  }
  const json* list = f.raw("sets");
  if (list == nullptr || !list->is_array() || list->empty()) {
    return f.field_error("sets", "expected a non-empty array of tensor lists");
  }
  for (size_t s = 0; s < list->size(); ++s) {
    std::string path = "sets[" + std::to_string(s) + "]";
    KILN_ASSIGN_OR_RETURN(auto tensors,
                          parse_tensors((*list)[s], "request 'time'", path, arena, false));
    if (!t.sets.empty()) {
      const auto& first = t.sets[0];
      bool same = tensors.size() == first.size();
      for (size_t i = 0; same && i < tensors.size(); ++i) {
        same = tensors[i].bytes == first[i].bytes && tensors[i].out == first[i].out &&
               tensors[i].scratch == first[i].scratch;
      }
      if (!same) {
        return f.field_error(path, "differs from sets[0] in tensor count, size or direction");
      }
    }
    t.sets.push_back(std::move(tensors));
  }
  if (t.rotate_contents && t.sets.size() < 2) {
    return f.field_error("rotate_contents", "needs at least two sets to rotate over");
  }
  if (const json* sites = f.raw("sites")) {
    if (!t.rotate_contents) return f.field_error("sites", "needs rotate_contents");
    if (!sites->is_array() || sites->size() != t.sets.size()) {
      return f.field_error("sites", "expected one array of sites per set");
    }
    for (size_t s = 0; s < sites->size(); ++s) {
      const json& list = (*sites)[s];
      if (!list.is_array() || list.size() > TimeRequest::kMaxSites) {
        return f.field_error("sites", "expected at most " + std::to_string(TimeRequest::kMaxSites) +
                                          " sites per set");
      }
      std::vector<InputPatch> patches;
      for (size_t i = 0; i < list.size(); ++i) {
        const json& p = list[i];
        std::string where = "sites[" + std::to_string(s) + "][" + std::to_string(i) + "]";
        if (!p.is_object() || !p.contains("tensor") || !p.contains("offset") ||
            !p.contains("bytes") || !p["tensor"].is_number_unsigned() ||
            !p["offset"].is_number_unsigned() || !p["bytes"].is_array()) {
          return f.field_error(where, "expected {tensor, offset, bytes: [..]}");
        }
        InputPatch patch{p["tensor"].get<size_t>(), p["offset"].get<size_t>(), {}};
        for (const json& b : p["bytes"]) {
          if (!b.is_number_unsigned() || b.get<unsigned>() > 255)
            return f.field_error(where, "bytes are 0..255");
          patch.bytes.push_back(static_cast<char>(b.get<unsigned>()));
        }
        const auto& tensors = t.sets[s];
        if (patch.tensor >= tensors.size() || tensors[patch.tensor].out ||
            tensors[patch.tensor].scratch || patch.bytes.empty() ||
            patch.offset + patch.bytes.size() > tensors[patch.tensor].bytes) {
          return f.field_error(where, "does not fit inside an input of its set");
        }
        patches.push_back(std::move(patch));
      }
      if (!t.sites.empty() && patches.size() != t.sites[0].size()) {
        return f.field_error("sites", "every set needs the same number of sites");
      }
      t.sites.push_back(std::move(patches));
    }
  }
  if (const json* checks = f.raw("checks")) {
    if (!checks->is_array()) return f.field_error("checks", "expected an array of check slots");
    for (size_t c = 0; c < checks->size(); ++c) {
      const json& slot = (*checks)[c];
      std::string where = "checks[" + std::to_string(c) + "]";
      if (!slot.is_array()) return f.field_error(where, "expected [{tensor, offset}, ...]");
      std::vector<std::pair<size_t, uint64_t>> outputs;
      for (const json& o : slot) {
        if (!o.is_object() || !o.contains("tensor") || !o.contains("offset") ||
            !o["tensor"].is_number_unsigned() || !o["offset"].is_number_unsigned()) {
          return f.field_error(where, "expected [{tensor, offset}, ...]");
        }
        const size_t tensor = o["tensor"].get<size_t>();
        if (tensor >= t.sets[0].size() || !t.sets[0][tensor].out) {
          return f.field_error(where, "names a tensor that is not an output");
        }
        const uint64_t offset = o["offset"].get<uint64_t>();
        KILN_RETURN_IF_ERROR(
            arena.check_range(offset, t.sets[0][tensor].bytes, "request 'time' " + where));
        outputs.emplace_back(tensor, offset);
      }
      t.checks.push_back(std::move(outputs));
    }
  }
  KILN_RETURN_IF_ERROR(f.finish());
  return t;
}

}  // namespace kiln::eval
