#include "shared/target_checks.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <string_view>

#include "shared/expr.h"
#include "shared/tensor_map_spec.h"
#include "shared/text.h"
#include "shared/triton_settings.h"

namespace kiln {
namespace {

std::string fmt_number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

// Why `name` cannot be a kernel's macro, or "".
std::string macro_name_problem(const TargetSpec& t, const std::string& name) {
  if (!is_identifier(name)) return "not a macro name";
  if (std::find(t.dims.begin(), t.dims.end(), name) != t.dims.end()) {
    return "the name of a dim (the kernel takes it as an argument)";
  }
  for (const TargetArg& a : t.args) {
    if (a.name == name) return "the name of an argument of the kernel";
  }
  if (name == "T") return "T is the element type the kernel is compiled for";
  if (name == "S") return "S is the element size in expressions";
  if (name.rfind("KILN_", 0) == 0 || name.rfind("kiln_", 0) == 0) {
    return "names beginning with KILN_ or kiln_ are kiln's own";
  }
  return "";
}

}  // namespace

Status check_kernel_names(const TargetSpec& t, const std::string& source) {
  for (const auto& [backend, b] : t.backends) {
    for (const KernelSpec* k : {&b.seed, b.tunable ? &*b.tunable : nullptr}) {
      if (!k) continue;
      const std::string which = "backends." + backend + (k == &b.seed ? ".seed" : ".template");
      auto error = [&](const std::string& field, const std::string& why) {
        return invalid_argument(source + ": field '" + which + "." + field + "': " + why);
      };
      for (const auto& [name, value] : k->defines) {
        if (std::string why = macro_name_problem(t, name); !why.empty()) {
          return error("defines", "'" + log_safe(name, 40) + "': " + why);
        }
      }
      uint64_t combinations = 1;
      for (const auto& [name, values] : k->space) {
        if (std::string why = macro_name_problem(t, name); !why.empty()) {
          return error("params." + log_safe(name, 40), why);
        }
        if (k->defines.count(name)) {
          return error("params." + name, "also a define; a name is one or the other");
        }
        combinations *= values.size();
        if (combinations > kMaxTemplateCombinations) {
          return error("params", "the space has more than " +
                                     std::to_string(kMaxTemplateCombinations) +
                                     " combinations, more than kiln lists or walks; give "
                                     "parameters fewer values, or split the template");
        }
      }
    }
  }
  return Status::ok();
}

Status check_shape_sizes(const TargetSpec& t, const std::string& source) {
  auto check = [&](const std::string& field, const Shape& shape) {
    Status ok = check_shape(t, shape);
    return ok.is_ok() ? ok : invalid_argument(source + ": field '" + field + "': " + ok.message());
  };
  KILN_RETURN_IF_ERROR(check("shapes.benchmark", t.benchmark));
  for (const auto& [key, list] :
       {std::pair{"smoke", &t.smoke}, {"sweep", &t.sweep}, {"edge", &t.edge}}) {
    for (size_t i = 0; i < list->size(); ++i) {
      KILN_RETURN_IF_ERROR(
          check(std::string("shapes.") + key + "[" + std::to_string(i) + "]", (*list)[i]));
    }
  }
  for (const auto& [name, b] : t.backends) {
    if (b.benchmark) KILN_RETURN_IF_ERROR(check("backends." + name + ".benchmark", *b.benchmark));
  }
  return Status::ok();
}

Status check_expressions(const TargetSpec& t, const std::string& source) {
  ExprVars vars = expr_vars(t.benchmark, t.dtypes.front(), {});
  for (const auto& [label, expr] : {std::pair{"bytes", t.bytes_expr}, {"flops", t.flops_expr}}) {
    Result<double> v = eval_expr(expr, vars);
    if (!v.is_ok())
      return invalid_argument(source + ": field '" + label + "': " + v.status().message());
    if (std::string_view(label) == "bytes" ? !(*v > 0) : !(*v >= 0)) {
      return invalid_argument(source + ": field '" + label + "': " + fmt_number(*v) +
                              " at the benchmark shape; the " + label + " of a launch must be " +
                              (std::string_view(label) == "bytes" ? "positive" : "0 or more"));
    }
  }
  for (size_t i = 0; i < t.args.size(); ++i) {
    const std::string where = source + ": field 'args[" + std::to_string(i) + "].";
    if (!t.args[i].index_bound.empty()) {
      Result<int64_t> v = eval_int_expr(t.args[i].index_bound, vars);
      if (!v.is_ok()) return invalid_argument(where + "index_bound': " + v.status().message());
    }
    if (!t.args[i].scale.empty()) {
      Result<double> v = eval_expr(t.args[i].scale, vars);
      if (!v.is_ok()) return invalid_argument(where + "scale': " + v.status().message());
      if (!(*v > 0) || !std::isfinite(*v))
        return invalid_argument(where + "scale': must be positive");
    }
  }
  for (const auto& [name, b] : t.backends) {
    for (const KernelSpec* k : {&b.seed, b.tunable ? &*b.tunable : nullptr}) {
      if (!k) continue;
      std::map<std::string, std::string> params = k->defines;
      for (const auto& [p, values] : k->space) params[p] = std::to_string(values.front());
      ExprVars kv = expr_vars(t.benchmark, t.dtypes.front(), params);
      std::string which = "backends." + name + (k == &b.seed ? ".seed" : ".template");
      for (int i = 0; i < 3; ++i) {
        for (const std::string* e : {&k->grid[i], &k->block[i]}) {
          Result<int64_t> v = eval_int_expr(*e, kv);
          if (!v.is_ok())
            return invalid_argument(source + ": field '" + which + "': " + v.status().message());
        }
      }
      Result<int64_t> smem = eval_int_expr(k->shared_bytes, kv);
      if (!smem.is_ok())
        return invalid_argument(source + ": field '" + which +
                                ".shared_bytes': " + smem.status().message());
      for (size_t i = 0; i < k->constraints.size(); ++i) {
        Result<double> holds = eval_expr(k->constraints[i], kv);
        if (!holds.is_ok()) {
          return invalid_argument(source + ": field '" + which + ".constraints[" +
                                  std::to_string(i) + "]': " + holds.status().message());
        }
      }
      if (name == "triton") {
        // A Triton program is 32 * num_warps threads (Triton's default: 4 warps), for every
        // num_warps the space has.
        std::vector<int64_t> warps = {kTritonDefaultWarps};
        if (auto it = k->space.find("num_warps"); it != k->space.end()) {
          warps = it->second;
        } else if (auto d = k->defines.find("num_warps"); d != k->defines.end()) {
          warps = {std::atoll(d->second.c_str())};
        }
        for (int64_t w : warps) {
          params["num_warps"] = std::to_string(w);
          const Result<int64_t> x =
              eval_int_expr(k->block[0], expr_vars(t.benchmark, t.dtypes.front(), params));
          if (!x.is_ok() || *x != triton_block_threads(w) || k->block[1] != "1" ||
              k->block[2] != "1") {
            return invalid_argument(source + ": field '" + which +
                                    ".block': a Triton program runs 32 * num_warps threads; "
                                    "write \"block\": [\"32 * num_warps\"]");
          }
        }
      }
      if (!k->tensor_maps.empty() && name != "cuda") {
        return invalid_argument(source + ": field '" + which +
                                ".tensor_maps': tensor maps are for the cuda backend only");
      }
      KILN_RETURN_IF_ERROR(check_tensor_map_specs(t, k->tensor_maps,
                                                  source + ": field '" + which + ".tensor_maps'"));
    }
  }
  return Status::ok();
}

}  // namespace kiln
