// Profile plans (see plan.h): Amdahl ranking from aggregated kernels, plan.json writing, and the
// strict reader `kiln run --plan` uses. The reader re-checks what the writer guarantees (shares in
// [0, 1] summing to at most 1, targets named once) because a plan is a file a user may edit.
#include "evaluator/profile/plan.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>

#include "evaluator/profile/op_shapes.h"
#include "evaluator/profile/trace_targets.h"
#include "shared/json_fields.h"
#include "shared/text.h"

namespace kiln::profile {
namespace {

using nlohmann::json;

// Rounding slack for shares that a writer summed to exactly 1.
constexpr double kShareSlack = 1e-6;

json kernel_json(const PlanKernel& k) {
  json j = {{"name", k.name},          {"calls", k.calls},       {"total_ns", k.total_ns},
            {"min_ns", k.min_ns},      {"max_ns", k.max_ns},     {"share", k.share},
            {"end_to_end_speedup", k.end_to_end_speedup}};
  j["target"] = k.target.empty() ? json(nullptr) : json(k.target);
  if (!k.mangled.empty()) j["mangled"] = k.mangled;
  return j;
}

Status get_u64(JsonFields& f, const std::string& key, uint64_t* out, bool required) {
  int64_t v = 0;
  KILN_RETURN_IF_ERROR(f.get(key, &v, required));
  if (v < 0) return f.field_error(key, "expected a non-negative integer, got " + std::to_string(v));
  if (f.has(key)) *out = static_cast<uint64_t>(v);
  return Status::ok();
}

Status get_share(JsonFields& f, const std::string& key, double* out) {
  KILN_RETURN_IF_ERROR(f.get(key, out, true));
  if (*out < 0 || *out > 1 + kShareSlack) {
    return f.field_error(key, "expected a fraction in [0, 1], got " + std::to_string(*out));
  }
  return Status::ok();
}

Status get_gain(JsonFields& f, const std::string& key, double* out) {
  KILN_RETURN_IF_ERROR(f.get(key, out, false));
  if (*out <= 0) return f.field_error(key, "expected a positive number, got " + std::to_string(*out));
  return Status::ok();
}

// A target name is what a target.json's "name" may be (an identifier, as the spec loader
// requires): one of the rules' targets or a user's own target.
bool valid_target_name(const std::string& name) {
  return name.size() <= 128 && is_identifier(name);
}

// One entry of a target's "shapes": {"shape": {dim: size}, "calls": n, "total_ns": t}.
Result<PlanShape> parse_shape(const json& j, const std::string& source, const std::string& path) {
  JsonFields f(j, source, path);
  KILN_RETURN_IF_ERROR(f.status());
  PlanShape s;
  const json* shape = f.raw("shape");
  if (shape == nullptr) return f.field_error("shape", "missing (required)");
  if (!shape->is_object() || shape->empty()) {
    return f.field_error("shape", "expected an object of dim -> size");
  }
  for (auto it = shape->begin(); it != shape->end(); ++it) {
    if (!it->is_number_integer() || it->get<int64_t>() <= 0 ||
        it->get<int64_t>() >= (int64_t{1} << 31)) {
      return f.field_error("shape",
                           "size of '" + it.key() + "': expected a positive integer below 2^31");
    }
    s.shape[it.key()] = it->get<int64_t>();
  }
  KILN_RETURN_IF_ERROR(get_u64(f, "calls", &s.calls, false));
  KILN_RETURN_IF_ERROR(get_u64(f, "total_ns", &s.total_ns, false));
  KILN_RETURN_IF_ERROR(f.finish());
  return s;
}

Result<PlanTarget> parse_target(const json& j, const std::string& source, const std::string& path) {
  JsonFields f(j, source, path);
  KILN_RETURN_IF_ERROR(f.status());
  PlanTarget t;
  KILN_RETURN_IF_ERROR(f.get("target", &t.target, true));
  if (!valid_target_name(t.target)) {
    return f.field_error(
        "target",
        "expected a target name (an identifier: letters, digits and _, not first a digit), got '" +
            log_safe(t.target, 80) + "'");
  }
  KILN_RETURN_IF_ERROR(get_share(f, "share", &t.share));
  KILN_RETURN_IF_ERROR(get_u64(f, "total_ns", &t.total_ns, true));
  KILN_RETURN_IF_ERROR(get_u64(f, "kernels", &t.kernels, false));
  KILN_RETURN_IF_ERROR(get_u64(f, "calls", &t.calls, false));
  KILN_RETURN_IF_ERROR(get_gain(f, "end_to_end_speedup", &t.end_to_end_speedup));
  if (const json* shapes = f.raw("shapes"); shapes != nullptr) {
    if (!shapes->is_array()) return f.field_error("shapes", "expected an array of objects");
    std::set<std::string> seen;
    for (size_t i = 0; i < shapes->size(); ++i) {
      const std::string at = path + ".shapes[" + std::to_string(i) + "]";
      KILN_ASSIGN_OR_RETURN(PlanShape s, parse_shape((*shapes)[i], source, at));
      if (!seen.insert(shape_string(s.shape)).second) {
        return invalid_argument(source + ": field '" + at + "': " + shape_string(s.shape) +
                                " is listed twice");
      }
      if (s.total_ns > t.total_ns) {
        return invalid_argument(source + ": field '" + at + ".total_ns': more than the target's " +
                                std::to_string(t.total_ns));
      }
      t.shapes.push_back(std::move(s));
    }
  }
  KILN_RETURN_IF_ERROR(f.finish());
  return t;
}

Result<PlanKernel> parse_kernel(const json& j, const std::string& source, const std::string& path) {
  JsonFields f(j, source, path);
  KILN_RETURN_IF_ERROR(f.status());
  PlanKernel k;
  KILN_RETURN_IF_ERROR(f.get("name", &k.name, true));
  if (k.name.empty()) return f.field_error("name", "empty");
  KILN_RETURN_IF_ERROR(f.get("mangled", &k.mangled, false));
  if (const json* t = f.raw("target"); t != nullptr && !t->is_null()) {
    KILN_RETURN_IF_ERROR(f.get("target", &k.target, false));
    if (!valid_target_name(k.target)) return f.field_error("target", "expected a target name or null");
  }
  KILN_RETURN_IF_ERROR(get_u64(f, "calls", &k.calls, true));
  KILN_RETURN_IF_ERROR(get_u64(f, "total_ns", &k.total_ns, true));
  KILN_RETURN_IF_ERROR(get_u64(f, "min_ns", &k.min_ns, false));
  KILN_RETURN_IF_ERROR(get_u64(f, "max_ns", &k.max_ns, false));
  KILN_RETURN_IF_ERROR(get_share(f, "share", &k.share));
  KILN_RETURN_IF_ERROR(get_gain(f, "end_to_end_speedup", &k.end_to_end_speedup));
  KILN_RETURN_IF_ERROR(f.finish());
  return k;
}

}  // namespace

double amdahl_speedup(double share, double speedup) {
  return 1.0 / ((1.0 - share) + share / speedup);
}

Plan make_plan(const std::vector<KernelStat>& stats, double speedup, uint64_t processes) {
  Plan plan;
  plan.speedup = speedup;
  plan.processes = processes;
  plan.total_gpu_ns = total_gpu_ns(stats);
  const double total = static_cast<double>(plan.total_gpu_ns);
  auto share_of = [total](uint64_t ns) { return total > 0 ? static_cast<double>(ns) / total : 0.0; };
  std::map<std::string, PlanTarget> by_target;
  uint64_t unmapped_ns = 0;
  for (const KernelStat& s : stats) {
    PlanKernel k{s.name, s.mangled, s.target, s.calls, s.total_ns, s.min_ns, s.max_ns};
    k.share = share_of(s.total_ns);
    k.end_to_end_speedup = amdahl_speedup(k.share, speedup);
    plan.kernels.push_back(std::move(k));
    plan.total_calls += s.calls;
    if (s.target.empty()) {
      unmapped_ns = add_ns(unmapped_ns, s.total_ns);
      continue;
    }
    PlanTarget& t = by_target[s.target];
    t.target = s.target;
    ++t.kernels;
    t.calls += s.calls;
    t.total_ns = add_ns(t.total_ns, s.total_ns);
  }
  for (auto& [name, t] : by_target) {
    t.share = share_of(t.total_ns);
    t.end_to_end_speedup = amdahl_speedup(t.share, speedup);
    plan.targets.push_back(t);
  }
  std::stable_sort(plan.targets.begin(), plan.targets.end(),
                   [](const PlanTarget& a, const PlanTarget& b) { return a.total_ns > b.total_ns; });
  plan.unmapped_share = share_of(unmapped_ns);
  return plan;
}

uint64_t add_plan_shapes(const std::vector<KernelRecord>& kernels, Plan* plan) {
  uint64_t with_range = 0;
  std::map<std::string, std::map<std::string, PlanShape>> by_target;  // target -> label -> shape
  for (const KernelRecord& k : kernels) {
    if (k.range.empty()) continue;
    ++with_range;
    // A shape comes only from an operator kiln computes, which is then the launch's target too
    // (map_launch_to_target).
    RangeShape r = shape_of_range(k.range);
    if (!r.shape) continue;
    PlanShape& s = by_target[r.target][shape_string(*r.shape)];
    s.shape = *r.shape;
    ++s.calls;
    s.total_ns = add_ns(s.total_ns, k.duration_ns());
  }
  for (PlanTarget& t : plan->targets) {
    auto it = by_target.find(t.target);
    t.shapes.clear();
    if (it == by_target.end()) continue;
    for (auto& [label, s] : it->second) t.shapes.push_back(s);
    std::stable_sort(t.shapes.begin(), t.shapes.end(), [](const PlanShape& a, const PlanShape& b) {
      return a.total_ns > b.total_ns;
    });
  }
  return with_range;
}

std::string plan_to_json(const Plan& plan) {
  json targets = json::array(), kernels = json::array();
  for (const PlanTarget& t : plan.targets) {
    json tj = {{"target", t.target}, {"kernels", t.kernels},
               {"calls", t.calls},   {"total_ns", t.total_ns},
               {"share", t.share},   {"end_to_end_speedup", t.end_to_end_speedup}};
    if (!t.shapes.empty()) {
      json shapes = json::array();
      for (const PlanShape& s : t.shapes) {
        shapes.push_back({{"shape", s.shape}, {"calls", s.calls}, {"total_ns", s.total_ns}});
      }
      tj["shapes"] = shapes;
    }
    targets.push_back(tj);
  }
  for (const PlanKernel& k : plan.kernels) kernels.push_back(kernel_json(k));
  json j = {{"kiln_plan", Plan::kFormatVersion}, {"command", plan.command},
            {"speedup", plan.speedup}, {"total_gpu_ns", plan.total_gpu_ns},
            {"total_calls", plan.total_calls}, {"processes", plan.processes},
            {"unmapped_share", plan.unmapped_share}, {"targets", targets}, {"kernels", kernels}};
  // Kernel names come from the program: replace bytes that are not UTF-8 rather than throw.
  return j.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
}

Status write_plan(const Plan& plan, const std::string& path) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return unavailable("cannot write " + tmp);
    out << plan_to_json(plan);
    if (!out.flush()) return unavailable("writing " + tmp + " failed");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    return unavailable("cannot rename " + tmp + " to " + path + ": " + std::strerror(errno));
  }
  return Status::ok();
}

Result<Plan> parse_plan(const std::string& text, const std::string& source) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return invalid_argument(source + ": not valid JSON");
  JsonFields f(j, source);
  KILN_RETURN_IF_ERROR(f.status());
  int version = 0;
  KILN_RETURN_IF_ERROR(f.get("kiln_plan", &version, true));
  if (version != Plan::kFormatVersion) {
    return f.field_error("kiln_plan", "format version " + std::to_string(version) +
                                          " is not one this kiln reads (" +
                                          std::to_string(Plan::kFormatVersion) + ")");
  }
  Plan plan;
  KILN_RETURN_IF_ERROR(f.get("command", &plan.command, false));
  KILN_RETURN_IF_ERROR(f.get("speedup", &plan.speedup, false));
  if (plan.speedup <= 0) return f.field_error("speedup", "expected a positive number");
  KILN_RETURN_IF_ERROR(get_u64(f, "total_gpu_ns", &plan.total_gpu_ns, true));
  KILN_RETURN_IF_ERROR(get_u64(f, "total_calls", &plan.total_calls, false));
  KILN_RETURN_IF_ERROR(get_u64(f, "processes", &plan.processes, false));
  KILN_RETURN_IF_ERROR(f.get("unmapped_share", &plan.unmapped_share, false));
  if (plan.unmapped_share < 0 || plan.unmapped_share > 1 + kShareSlack) {
    return f.field_error("unmapped_share", "expected a fraction in [0, 1]");
  }
  const json* targets = f.raw("targets");
  if (targets == nullptr) return f.field_error("targets", "missing (required)");
  if (!targets->is_array()) return f.field_error("targets", "expected an array of objects");
  std::set<std::string> seen;
  double share_sum = 0;
  for (size_t i = 0; i < targets->size(); ++i) {
    const std::string path = "targets[" + std::to_string(i) + "]";
    KILN_ASSIGN_OR_RETURN(PlanTarget t, parse_target((*targets)[i], source, path));
    if (!seen.insert(t.target).second) {
      return invalid_argument(source + ": field '" + path + ".target': '" + t.target +
                              "' is listed twice");
    }
    if (t.total_ns > plan.total_gpu_ns) {
      return invalid_argument(source + ": field '" + path + ".total_ns': " +
                              std::to_string(t.total_ns) + " is more than total_gpu_ns " +
                              std::to_string(plan.total_gpu_ns));
    }
    share_sum += t.share;
    plan.targets.push_back(std::move(t));
  }
  if (share_sum > 1 + kShareSlack) {
    return f.field_error("targets", "the shares add up to " + std::to_string(share_sum) +
                                        ", more than 1");
  }
  if (const json* kernels = f.raw("kernels"); kernels != nullptr) {
    if (!kernels->is_array()) return f.field_error("kernels", "expected an array of objects");
    for (size_t i = 0; i < kernels->size(); ++i) {
      KILN_ASSIGN_OR_RETURN(PlanKernel k,
                            parse_kernel((*kernels)[i], source, "kernels[" + std::to_string(i) + "]"));
      plan.kernels.push_back(std::move(k));
    }
  }
  KILN_RETURN_IF_ERROR(f.finish());
  return plan;
}

Result<Plan> load_plan(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return not_found(path + ": cannot open plan file");
  std::stringstream buffer;
  buffer << in.rdbuf();
  return parse_plan(buffer.str(), path);
}

std::map<std::string, double> target_weights(const Plan& plan) {
  std::map<std::string, double> weights;
  for (const PlanTarget& t : plan.targets) {
    if (t.share > 0) weights[t.target] = t.share;
  }
  return weights;
}

}  // namespace kiln::profile
