// Launch geometry and constraints from a kernel spec's expressions, and timing statistics.
#include <algorithm>

#include "evaluator/evaluation.h"

#include <cstdlib>
#include <functional>

namespace kiln::eval {

Result<LaunchGeometry> launch_geometry(const KernelSpec& spec, const Shape& shape, DType dtype,
                                       const std::map<std::string, std::string>& params) {
  ExprVars vars = expr_vars(shape, dtype, params);
  LaunchGeometry g;
  for (int i = 0; i < 3; ++i) {
    KILN_ASSIGN_OR_RETURN(int64_t grid, eval_int_expr(spec.grid[i], vars));
    KILN_ASSIGN_OR_RETURN(int64_t block, eval_int_expr(spec.block[i], vars));
    if (grid < 1 || grid > 0x7fffffff || block < 1 || block > 1024) {
      return invalid_argument("launch geometry out of range: grid " + std::to_string(grid) +
                              ", block " + std::to_string(block));
    }
    g.grid[i] = static_cast<uint32_t>(grid);
    g.block[i] = static_cast<uint32_t>(block);
  }
  KILN_ASSIGN_OR_RETURN(int64_t smem, eval_int_expr(spec.shared_bytes, vars));
  if (smem > (1 << 20)) return invalid_argument("shared_bytes " + std::to_string(smem) + " too large");
  g.shared_bytes = static_cast<uint32_t>(smem);
  return g;
}

Result<bool> satisfies_constraints(const KernelSpec& spec, const Shape& shape, DType dtype,
                                   const std::map<std::string, std::string>& params) {
  ExprVars vars = expr_vars(shape, dtype, params);
  for (const auto& c : spec.constraints) {
    KILN_ASSIGN_OR_RETURN(double v, eval_expr(c, vars));
    if (v == 0) return false;
  }
  return true;
}

void for_each_combination(const KernelSpec& spec,
                          const std::function<bool(const std::map<std::string, std::string>&)>& take) {
  std::map<std::string, std::string> current = spec.defines;
  std::vector<std::pair<std::string, const std::vector<int64_t>*>> axes;
  for (const auto& [name, values] : spec.space) {
    if (values.empty()) return;  // an empty list: no configuration at all
    axes.push_back({name, &values});
  }
  // Odometer over the parameter lists, first parameter fastest.
  std::vector<size_t> index(axes.size(), 0);
  while (true) {
    for (size_t i = 0; i < axes.size(); ++i) current[axes[i].first] = std::to_string((*axes[i].second)[index[i]]);
    if (!take(current)) return;
    size_t i = 0;
    while (i < axes.size() && ++index[i] == axes[i].second->size()) index[i++] = 0;
    if (i == axes.size()) return;
  }
}

ConstraintCheck::ConstraintCheck(const KernelSpec& spec, const Shape& shape, DType dtype,
                                 std::vector<std::string> parameters) {
  // The variables: the shape, the dtype's size, the numeric defines, and the parameters.
  ExprVars vars = expr_vars(shape, dtype, spec.defines);
  for (const std::string& name : parameters) vars[name] = 0;
  std::vector<std::string> names;
  for (const auto& [name, value] : vars) names.push_back(name);
  Result<ExprProgram> program = ExprProgram::compile(spec.constraints, names);
  if (!program.is_ok()) return;  // constraints that do not parse admit nothing
  program_.emplace(std::move(program).value());
  for (const auto& [name, value] : vars) program_->set(program_->variable(name), value);
  for (const std::string& name : parameters) slots_.push_back(program_->variable(name));
}

bool ConstraintCheck::admits(const std::vector<double>& values) {
  if (!program_) return false;
  for (size_t i = 0; i < slots_.size() && i < values.size(); ++i) program_->set(slots_[i], values[i]);
  for (size_t c = 0; c < program_->size(); ++c) {
    Result<double> v = program_->eval(c);
    if (!v.is_ok() || *v == 0) return false;
  }
  return true;
}

void for_each_config(const KernelSpec& spec, const Shape& shape, DType dtype,
                     const std::function<bool(const std::map<std::string, std::string>&)>& take) {
  std::vector<std::string> parameters;
  for (const auto& [name, values] : spec.space) parameters.push_back(name);
  ConstraintCheck check(spec, shape, dtype, parameters);
  std::vector<double> values(parameters.size());
  for_each_combination(spec, [&](const std::map<std::string, std::string>& params) {
    for (size_t i = 0; i < parameters.size(); ++i) values[i] = std::strtod(params.at(parameters[i]).c_str(), nullptr);
    return !check.admits(values) || take(params);
  });
}

TimingStats timing_stats(const std::vector<double>& samples_us,
                         const std::vector<double>& clocks_mhz, double throttle_fraction) {
  TimingStats s;
  double max_clock = 0;
  for (double c : clocks_mhz) max_clock = std::max(max_clock, c);
  std::vector<double> kept;
  double clock_sum = 0;
  for (size_t i = 0; i < samples_us.size(); ++i) {
    double clock = i < clocks_mhz.size() ? clocks_mhz[i] : 0;
    if (max_clock > 0 && clock > 0 && clock < throttle_fraction * max_clock) {
      ++s.dropped;  // throttled: this sample ran at a lower clock than the others
      continue;
    }
    kept.push_back(samples_us[i]);
    clock_sum += clock;
  }
  if (kept.empty()) return s;
  std::sort(kept.begin(), kept.end());
  auto quantile = [&](double q) {
    double pos = q * (kept.size() - 1);
    size_t lo = static_cast<size_t>(pos);
    size_t hi = std::min(lo + 1, kept.size() - 1);
    return kept[lo] + (kept[hi] - kept[lo]) * (pos - lo);
  };
  s.samples = static_cast<uint32_t>(kept.size());
  s.median_us = quantile(0.5);
  s.iqr_us = quantile(0.75) - quantile(0.25);
  s.min_us = kept.front();
  s.noise_rel = s.median_us > 0 ? s.iqr_us / s.median_us : 0;
  s.sm_clock_mhz = clock_sum / kept.size();
  return s;
}

}  // namespace kiln::eval
