// Launch geometry and constraints from a kernel spec's expressions, and timing statistics.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>

#include "evaluator/evaluation.h"

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

namespace {

// The q-quantile of sorted values, interpolated linearly between order statistics.
double quantile(const std::vector<double>& sorted, double q) {
  const double pos = q * static_cast<double>(sorted.size() - 1);
  const size_t lo = static_cast<size_t>(pos);
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - static_cast<double>(lo));
}

}  // namespace

double relative_iqr(std::vector<double> samples) {
  if (samples.size() < 2) return 1.0;
  std::sort(samples.begin(), samples.end());
  const double median = quantile(samples, 0.5);
  return median > 0 ? (quantile(samples, 0.75) - quantile(samples, 0.25)) / median : 1.0;
}

TimingStats timing_stats(const std::vector<double>& samples_us,
                         const std::vector<double>& clocks_mhz, double throttle_fraction) {
  TimingStats s;
  if (samples_us.empty()) return s;
  double clock_sum = 0;
  size_t clocks = 0;
  for (double c : clocks_mhz) {
    if (c <= 0) continue;
    s.max_clock_mhz = std::max(s.max_clock_mhz, c);
    s.min_clock_mhz = clocks == 0 ? c : std::min(s.min_clock_mhz, c);
    clock_sum += c;
    ++clocks;
  }
  for (double c : clocks_mhz) {
    if (c > 0 && c < throttle_fraction * s.max_clock_mhz) ++s.throttled;
  }
  std::vector<double> sorted = samples_us;
  std::sort(sorted.begin(), sorted.end());
  s.samples = static_cast<uint32_t>(sorted.size());
  s.median_us = quantile(sorted, 0.5);
  s.iqr_us = quantile(sorted, 0.75) - quantile(sorted, 0.25);
  s.min_us = sorted.front();
  s.noise_rel = s.median_us > 0 ? s.iqr_us / s.median_us : 0;
  s.sm_clock_mhz = clocks > 0 ? clock_sum / static_cast<double>(clocks) : 0;
  return s;
}

std::string timing_problem(const std::vector<double>& samples_us, double max_noise_rel,
                           double gap_ratio, double side_fraction, double straggler_fraction) {
  if (samples_us.size() < 4) return "";
  std::vector<double> sorted = samples_us;
  std::sort(sorted.begin(), sorted.end());
  const double median = quantile(sorted, 0.5);
  if (median <= 0) return "";
  auto us = [](double v) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%.3g", v);
    return std::string(buf);
  };
  const double noise = relative_iqr(sorted);
  if (noise > max_noise_rel) {
    return "samples too noisy for a median: relative IQR " + us(noise * 100) + "% over " +
           std::to_string(sorted.size()) + " samples (limit " + us(max_noise_rel * 100) +
           "%); a kernel whose work differs between launches, or a machine too busy to time on";
  }
  // Two clusters: a lower one [0, i) and an upper one [j, n), each at least `side` samples, the
  // upper one's fastest more than gap_ratio x the lower one's slowest, with at most `stray`
  // samples between them (launches caught by an interrupt or a clock change would otherwise
  // hide the gap).
  const size_t n = sorted.size();
  const size_t side = std::max<size_t>(2, static_cast<size_t>(std::ceil(side_fraction * n)));
  const size_t stray = std::max<size_t>(2, static_cast<size_t>(straggler_fraction * n));
  size_t best_i = 0, best_j = 0;  // the split with the fewest samples between its clusters
  for (size_t i = side; i + side <= n; ++i) {
    const double top = gap_ratio * std::max(sorted[i - 1], 0.0);
    const auto j = static_cast<size_t>(std::upper_bound(sorted.begin() + i, sorted.end(), top) -
                                       sorted.begin());
    if (n - j < side || j - i > stray) continue;
    if (best_i == 0 || j - i < best_j - best_i) {
      best_i = i;
      best_j = j;
    }
  }
  if (best_i > 0) {
    const size_t i = best_i, j = best_j;
    auto median_of = [&](size_t from, size_t to) {
      return us(quantile(std::vector<double>(sorted.begin() + from, sorted.begin() + to), 0.5));
    };
    return "bimodal samples: " + std::to_string(i) + " near " + median_of(0, i) + " us and " +
           std::to_string(n - j) + " near " + median_of(j, n) + " us, " +
           (j == i ? std::string("none") : std::to_string(j - i)) + " between " +
           us(sorted[i - 1]) + " and " + us(sorted[j]) +
           " us: a kernel whose work differs between launches has no single time";
  }
  return "";
}

SampleVerdict judge_samples(const std::vector<double>& samples_us,
                            const std::vector<double>& probes_us, size_t min_kept,
                            double busy_ratio, double slack) {
  SampleVerdict v;
  v.problem = timing_problem(samples_us);
  const size_t n = samples_us.size();
  if (v.problem.empty() || probes_us.size() != n || n < 4) return v;
  if (std::any_of(probes_us.begin(), probes_us.end(), [](double p) { return !(p > 0); })) return v;
  std::vector<double> sorted = probes_us;
  std::sort(sorted.begin(), sorted.end());
  const double quiet_probe = quantile(sorted, 0.25);
  const double busy_above = busy_ratio * quiet_probe;
  std::vector<double> quiet_samples;
  for (size_t i = 0; i < n; ++i) {
    if (probes_us[i] <= busy_above) quiet_samples.push_back(samples_us[i]);
  }
  if (quiet_samples.size() == n) return v;
  std::sort(quiet_samples.begin(), quiet_samples.end());
  const double quiet_median = quiet_samples.empty() ? 0 : quantile(quiet_samples, 0.5);
  // A busy sample is set aside only where the machine's slowdown explains it: no slower than
  // the quiet median scaled by how much slower its probe ran, with some slack. Sixteen times the
  // work at a moment the probe ran twice as slow stays in the set.
  std::vector<size_t> kept;
  std::vector<double> kept_samples;
  size_t busy = 0;
  for (size_t i = 0; i < n; ++i) {
    const bool is_busy = probes_us[i] > busy_above;
    busy += is_busy;
    if (is_busy && samples_us[i] <= quiet_median * probes_us[i] / quiet_probe * slack) continue;
    kept.push_back(i);
    kept_samples.push_back(samples_us[i]);
  }
  // Refused with busy samples in the set, the verdict says how many: a user can tell a loaded
  // machine from a kernel.
  const std::string busy_count = " (" + std::to_string(busy) + " of " + std::to_string(n) +
                                 " samples taken while the machine probe saw the machine busy)";
  if (kept.size() == n || kept.size() < std::max(min_kept, (n + 3) / 4) ||
      !timing_problem(kept_samples).empty()) {
    v.problem += busy_count;
    return v;
  }
  v.busy = std::move(v.problem);
  v.problem.clear();
  v.kept = std::move(kept);
  return v;
}

}  // namespace kiln::eval
