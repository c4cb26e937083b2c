// Dispatch tables of shape sweeps for the report (see sweep_table.h).
#include "report/sweep_table.h"

#include <cmath>

#include "report/analysis.h"
#include "report/format.h"

namespace kiln::report {

std::vector<SweepTable> sweep_tables(const RunData& run) {
  std::vector<SweepTable> out;
  for (const UnitSummary& u : run.units) {
    if (u.shape.empty()) continue;
    SweepTable* t = nullptr;
    for (SweepTable& have : out) {
      if (have.target == u.target && have.gpu_model == u.gpu_model) t = &have;
    }
    if (!t) {
      out.push_back({u.target, u.gpu_model, {}, {}, 0, 0});
      t = &out.back();
    }
    t->entries.push_back({u.shape, u.best_us, u.best_label, 0});
  }
  for (SweepTable& t : out) {
    // Each configuration's fastest verified time at each shape it was timed at.
    std::map<std::map<std::string, std::string>, std::map<std::string, double>> times;
    for (const ResultRow& r : run.rows) {
      if (r.target != t.target || r.gpu_model != t.gpu_model || r.shape.empty() ||
          r.params.empty() || r.outcome != "verified" || !(r.median_us > 0))
        continue;
      double& best = times[r.params][r.shape];
      if (best == 0 || r.median_us < best) best = r.median_us;
    }
    std::map<std::string, double> best_of;
    for (const SweepEntry& e : t.entries) best_of[e.shape] = e.best_us;
    double chosen_mean = 0;
    for (const auto& [params, at] : times) {
      size_t n = 0;
      double log_sum = 0;
      for (const auto& [shape, us] : at) {
        auto b = best_of.find(shape);
        if (b == best_of.end() || !(b->second > 0)) continue;
        ++n;
        log_sum += std::log(us / b->second);
      }
      if (n < 2) continue;
      const double mean = std::exp(log_sum / static_cast<double>(n));
      if (n > t.single_shapes || (n == t.single_shapes && mean < chosen_mean)) {
        t.single_params = params;
        t.single_shapes = n;
        chosen_mean = mean;
      }
    }
    t.single_over_table = chosen_mean;
    if (t.single_params.empty()) continue;
    const auto& at = times.at(t.single_params);
    for (SweepEntry& e : t.entries) {
      auto it = at.find(e.shape);
      if (it != at.end()) e.single_us = it->second;
    }
  }
  return out;
}

std::string single_config_sentence(const SweepTable& t) {
  if (t.single_params.empty()) {
    return "No configuration was timed at two of these shapes or more, so there is no single "
           "configuration to compare with (populations time their neighbours' bests unless the "
           "run had --no-transfer).";
  }
  return "One configuration for every shape, " + params_text(t.single_params) + " (timed at " +
         std::to_string(t.single_shapes) + " of " + std::to_string(t.entries.size()) +
         " shapes), takes " + speedup(t.single_over_table) +
         " the dispatch table's time there (geometric mean of its time over each shape's best).";
}

}  // namespace kiln::report
