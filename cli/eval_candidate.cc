// The candidate of `kiln eval`: kernel text, geometry and parameters, and what to say when the
// template's constraints fail.
#include "cli/eval_candidate.h"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>

#include "cli/run_support.h"
#include "cli/sweep.h"
#include "shared/text.h"

namespace kiln::cli {
namespace {

using Params = std::map<std::string, std::string>;

std::string number(double v) {
  char buf[64];
  if (std::isfinite(v) && v == std::floor(v) && std::fabs(v) < 1e18) {
    std::snprintf(buf, sizeof(buf), "%lld", static_cast<long long>(v));
  } else {
    std::snprintf(buf, sizeof(buf), "%g", v);
  }
  return buf;
}

// "0256" and "256" name the same value; a value that is not an integer is kept as it is.
std::string normalized(const std::string& v) {
  const std::optional<int64_t> x = parse_int64(v);
  return x ? std::to_string(*x) : v;
}

// The identifiers of `expr` in order of first appearance.
std::vector<std::string> identifiers(const std::string& expr) {
  std::vector<std::string> out;
  std::set<std::string> seen;
  for (size_t i = 0; i < expr.size();) {
    const auto c = static_cast<unsigned char>(expr[i]);
    if (std::isalpha(c) || c == '_') {
      size_t j = i;
      while (j < expr.size() &&
             (std::isalnum(static_cast<unsigned char>(expr[j])) || expr[j] == '_'))
        ++j;
      std::string name = expr.substr(i, j - i);
      if (seen.insert(name).second) out.push_back(name);
      i = j;
    } else if (std::isdigit(c)) {
      while (i < expr.size() &&
             (std::isalnum(static_cast<unsigned char>(expr[i])) || expr[i] == '.'))
        ++i;
    } else {
      ++i;
    }
  }
  return out;
}

// The configuration of the template's space that meets its constraints at shape/dtype and differs
// from `used` in the fewest parameters (the first such in for_each_config's order), if any.
std::optional<Params> closest_config(const KernelSpec& spec, const Shape& shape, DType dtype,
                                     const Params& used) {
  std::optional<Params> best;
  size_t best_changes = 0;
  eval::for_each_config(spec, shape, dtype, [&](const Params& p) {
    size_t changes = 0;
    for (const auto& [name, values] : spec.space)
      changes += p.at(name) != normalized(used.at(name));
    if (!best || changes < best_changes) {
      best = p;
      best_changes = changes;
    }
    return best_changes > 1;  // one change is as close as a failing configuration gets
  });
  return best;
}

// The message for parameters that break the template's constraints.
std::string constraint_message(const CandidateChoice& c, const CandidateArgs& a, const Shape& shape,
                               DType dtype, const std::vector<std::string>& failing) {
  const KernelSpec& spec = *c.spec;
  Params template_params;
  for (const auto& [name, values] : spec.space) template_params[name] = c.candidate.params.at(name);
  std::string m =
      "the template's parameters " + format_params(template_params) + " (" + c.params_note +
      ") break " +
      (failing.size() == 1 ? "a constraint" : std::to_string(failing.size()) + " constraints") +
      " at " + shape_string(shape) + ", " + std::string(dtype_name(dtype)) + ":\n";
  for (const auto& f : failing) m += "  " + f + "\n";
  const std::string seed_fix = a.source_file.empty()
                                   ? "evaluate the seed (drop --template and --params)"
                                   : "--geometry seed (the seed's launch geometry and -D values)";
  std::optional<Params> fix = closest_config(spec, shape, dtype, c.candidate.params);
  if (!fix) {
    return m +
           "no configuration of the template meets its constraints at this shape and dtype; fix: " +
           seed_fix + ", or another --shape or --dtype";
  }
  // The --params to pass: the values given, with the ones that must change changed.
  Params suggestion;
  std::string changed;
  for (const auto& [name, values] : spec.space) {
    const bool differs = fix->at(name) != normalized(c.candidate.params.at(name));
    if (differs) changed += (changed.empty() ? "" : ", ") + name;
    if (differs || a.params.count(name)) suggestion[name] = fix->at(name);
  }
  return m + "fix: --params " + format_params(suggestion) +
         " (the nearest configuration that meets them: " + changed + " changed), or " + seed_fix;
}

}  // namespace

std::vector<std::string> failing_constraints(const KernelSpec& spec, const Shape& shape,
                                             DType dtype, const Params& params) {
  std::vector<std::string> out;
  const ExprVars vars = expr_vars(shape, dtype, params);
  for (const std::string& expr : spec.constraints) {
    Result<double> v = eval_expr(expr, vars);
    if (v.is_ok() && *v != 0) continue;
    std::string values;
    for (const std::string& name : identifiers(expr)) {
      auto it = vars.find(name);
      if (it != vars.end())
        values += (values.empty() ? "" : ", ") + name + "=" + number(it->second);
    }
    out.push_back(expr + "  (" + values +
                  (v.is_ok() ? "" : "; cannot be evaluated: " + v.status().message()) + ")");
  }
  return out;
}

Result<std::map<std::string, std::string>> parse_pairs(const std::string& text, const char* what) {
  std::map<std::string, std::string> out;
  std::stringstream ss(text);
  std::string item;
  // "," once meant no parameters at all: the seed, not the template.
  KILN_RETURN_IF_ERROR(check_list(text, what));
  while (std::getline(ss, item, ',')) {
    size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == item.size()) {
      return invalid_argument(std::string(what) + ": '" + item + "' is not KEY=VALUE");
    }
    if (!out.emplace(item.substr(0, eq), item.substr(eq + 1)).second) {
      return invalid_argument(std::string(what) + ": '" + item.substr(0, std::min<size_t>(eq, 60)) +
                              "' is given twice");
    }
  }
  return out;
}

Result<CandidateChoice> choose_candidate(const BackendSpec& b, const CandidateArgs& a,
                                         const Shape& shape, DType dtype) {
  if (!a.geometry.empty() && a.geometry != "seed" && a.geometry != "template") {
    return invalid_argument("--geometry: '" + a.geometry + "' is neither seed nor template");
  }
  const bool wants_template = a.use_template || !a.params.empty() || a.sweep;
  CandidateChoice out;
  out.geometry = !a.geometry.empty() ? a.geometry : wants_template ? "template" : "seed";
  if (out.geometry == "seed" && wants_template) {
    const char* flag = a.sweep ? "--sweep" : a.use_template ? "--template" : "--params";
    return invalid_argument(std::string(flag) +
                            " sets the template's parameters, which the seed's geometry does "
                            "not have (its -D values are fixed): drop --geometry seed, or " +
                            flag);
  }
  if (out.geometry == "template" && !b.tunable) {
    return invalid_argument(
        "there is no template on this backend, only the seed: drop --geometry template, "
        "--template, --params and --sweep");
  }
  const KernelSpec& spec = out.geometry == "template" ? *b.tunable : b.seed;
  out.spec = &spec;
  eval::CandidateSpec& c = out.candidate;
  c.geometry = &spec;
  c.kernel_name = a.kernel.empty() ? spec.kernel_name : a.kernel;
  c.params = spec.defines;
  if (out.geometry == "template") {
    for (const auto& [name, value] : a.params) {
      if (!spec.space.count(name)) {
        std::string known;
        for (const auto& [k, v] : spec.space) known += (known.empty() ? "" : ", ") + k;
        return invalid_argument("--params: '" + name +
                                "' is not a parameter of the template (parameters: " + known + ")");
      }
      // A parameter is an integer (target.json lists integers): a value becomes a -D macro, and
      // anything else failed later as a compile error or as the scan's finding.
      if (!parse_int64(value)) {
        std::string values;
        for (int64_t v : spec.space.at(name))
          values += (values.empty() ? "" : ", ") + std::to_string(v);
        return invalid_argument("--params: " + name + "=" + log_safe(value, 40) +
                                ": a template parameter is a whole number (" + name + " takes " +
                                values + " in the template's space)");
      }
    }
    // The first configuration that meets the constraints here and keeps the given values.
    std::optional<Params> pick;
    if (!a.sweep) {
      eval::for_each_config(spec, shape, dtype, [&](const Params& p) {
        for (const auto& [name, value] : a.params) {
          if (p.at(name) != normalized(value)) return true;
        }
        pick = p;
        return false;
      });
    }
    if (pick) {
      c.params = *pick;
      out.params_note = a.params.empty()
                            ? "the first configuration that meets the constraints"
                            : "given by --params; the others from the first configuration that "
                              "meets the constraints with them";
    } else {
      for (const auto& [name, values] : spec.space) c.params[name] = std::to_string(values.front());
      out.params_note = a.params.empty() ? "the first value of each"
                                         : "given by --params; the others at their first value";
    }
    for (const auto& [name, value] : a.params) c.params[name] = value;
  }
  if (a.source_file.empty()) {
    c.source = spec.source;
    c.label = out.geometry;
  } else {
    std::error_code ec;
    if (std::filesystem::is_directory(a.source_file, ec)) {
      return invalid_argument("--source " + a.source_file +
                              " is a folder; name the kernel's source file");
    }
    std::ifstream in(a.source_file, std::ios::binary);
    if (!in) return invalid_argument("cannot read --source " + a.source_file);
    std::stringstream ss;
    ss << in.rdbuf();
    c.source = ss.str();
    c.label = std::filesystem::path(a.source_file).filename().string();
  }
  if (out.geometry == "template" && !a.sweep) {
    std::vector<std::string> failing = failing_constraints(spec, shape, dtype, c.params);
    if (!failing.empty())
      return invalid_argument(constraint_message(out, a, shape, dtype, failing));
  }
  return out;
}

nlohmann::json geometry_json(const CandidateChoice& c, const Shape& shape, DType dtype) {
  nlohmann::json j = {{"from", c.geometry}, {"shape", shape}};
  Result<eval::LaunchGeometry> g = eval::launch_geometry(*c.spec, shape, dtype, c.candidate.params);
  if (!g.is_ok()) {
    j["error"] = g.status().message();
    return j;
  }
  j["grid"] = {g->grid[0], g->grid[1], g->grid[2]};
  j["block"] = {g->block[0], g->block[1], g->block[2]};
  j["shared_bytes"] = g->shared_bytes;
  return j;
}

}  // namespace kiln::cli
