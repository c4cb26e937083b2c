// Figures derived from RunData for both renderers (see analysis.h).
#include "report/analysis.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "report/format.h"

namespace kiln::report {

std::string unit_label(const UnitSummary& unit) {
  const std::string at = unit.shape.empty() ? unit.target : unit.target + " " + unit.shape;
  return unit.gpu_model.empty() ? at : at + " @ " + unit.gpu_model;
}

std::string unit_key(const UnitSummary& unit) {
  const std::string at = unit.shape.empty() ? unit.target : unit.target + "-" + unit.shape;
  return unit.gpu_model.empty() ? at : at + "@" + unit.gpu_model;
}

std::vector<const ResultRow*> rows_of(const RunData& run, const UnitSummary& unit) {
  std::vector<const ResultRow*> out;
  for (const auto& r : run.rows)
    if (r.target == unit.target && r.gpu_model == unit.gpu_model && r.shape == unit.shape)
      out.push_back(&r);
  return out;
}

bool is_timed(const ResultRow& row) { return std::isfinite(row.median_us) && row.median_us > 0; }

bool is_kept(const ResultRow& row) { return row.verdict == "kept" || row.verdict == "crowned"; }

std::vector<double> best_so_far(const std::vector<const ResultRow*>& rows) {
  bool verdicts = false;
  for (const ResultRow* r : rows) verdicts |= !r->verdict.empty();
  std::vector<double> out;
  double best = 0;
  for (const ResultRow* r : rows) {
    // A kept child is only a parent for more children; the best changes when a re-time crowns
    // one (a child that beat the best, timed again so that one lucky sample does not win).
    const bool counts =
        verdicts ? (r->verdict == "baseline" || r->verdict == "crowned") : r->outcome == "verified";
    if (counts && is_timed(*r) && (best == 0 || r->median_us < best)) best = r->median_us;
    out.push_back(best);
  }
  return out;
}

Roof roof_of(const std::vector<const ResultRow*>& rows) {
  // The bound resource is the one whose ideal time is longer: bytes / peak bandwidth against
  // flops / peak flop rate. Both are proportional to the achieved rates (same kernel time), so
  // the rates' fractions of their peaks decide it.
  double peak_b = 0, peak_f = 0, frac_b = 0, frac_f = 0;
  bool bytes_seen = false;
  for (const ResultRow* r : rows) {
    peak_b = std::max(peak_b, r->peak_bytes_per_s);
    peak_f = std::max(peak_f, r->peak_flops_per_s);
    bytes_seen |= r->bytes_per_s > 0;
    if (r->peak_bytes_per_s > 0 && r->peak_flops_per_s > 0 && frac_b == 0 && frac_f == 0 &&
        (r->bytes_per_s > 0 || r->flops_per_s > 0)) {
      frac_b = r->bytes_per_s / r->peak_bytes_per_s;
      frac_f = r->flops_per_s / r->peak_flops_per_s;
    }
  }
  Roof roof;
  if (frac_b > 0 || frac_f > 0)
    roof.bandwidth = frac_b >= frac_f;
  else if (peak_b > 0 || peak_f > 0)
    roof.bandwidth = peak_b > 0;  // only one ceiling was measured: show against that one
  else
    roof.bandwidth = bytes_seen;
  roof.peak = roof.bandwidth ? peak_b : peak_f;
  return roof;
}

double achieved(const ResultRow& row, const Roof& roof) {
  const double v = roof.bandwidth ? row.bytes_per_s : row.flops_per_s;
  return std::isfinite(v) && v > 0 ? v : 0;
}

Lineage lineage_of(const UnitSummary& unit, const std::vector<const ResultRow*>& rows) {
  // One entry per candidate: its last verified time (a crowned candidate's re-time), and the row
  // that tells where it came from: a verified one before a failed one (a failed row of the same
  // id says nothing more), its first evaluation before a re-time.
  struct Info {
    double median_us = 0;
    const ResultRow* pick = nullptr;
  };
  auto rank = [](const ResultRow* r) {
    return (r->outcome == "verified" ? 2 : 0) + (r->kind != "retime" ? 1 : 0);
  };
  std::map<std::string, Info> by_id;
  for (const ResultRow* r : rows) {
    Info& i = by_id[r->candidate_id];
    if (r->outcome == "verified" && is_timed(*r)) i.median_us = r->median_us;
    if (!i.pick || rank(r) > rank(i.pick)) i.pick = r;
  }
  Lineage out;
  if (unit.best_id.empty()) {
    out.note = "no candidate was crowned yet";
    return out;
  }
  std::vector<LineageStep> chain;
  std::set<std::string> seen;
  std::string id = unit.best_id;
  while (true) {
    auto it = by_id.find(id);
    if (it == by_id.end()) {
      out.note = chain.empty() ? "the best (" + id.substr(0, 12) + ") is not among the results"
                               : "its parent " + id.substr(0, 12) + " is not among the results";
      break;
    }
    if (!seen.insert(id).second) {
      out.note = "the parents form a loop at " + id.substr(0, 12);
      break;
    }
    const ResultRow& r = *it->second.pick;
    LineageStep s;
    s.candidate_id = id;
    const bool seed = r.kind == "seed" || (chain.empty() && unit.best_label == "seed");
    s.op = r.op.empty() && seed ? "seed" : r.op;
    s.model = r.model;
    s.median_us = it->second.median_us;
    chain.push_back(s);
    if (seed || r.op == "seed") break;
    if (r.parent_id.empty()) {
      out.note = "the run recorded no parent for " + id.substr(0, 12) +
                 " (results of an older kiln do not name parents)";
      break;
    }
    id = r.parent_id;
  }
  std::reverse(chain.begin(), chain.end());
  for (size_t k = 1; k < chain.size(); ++k) {
    if (chain[k].median_us > 0 && chain[k - 1].median_us > 0)
      chain[k].gain = chain[k - 1].median_us / chain[k].median_us;
  }
  out.steps = std::move(chain);
  return out;
}

std::vector<FailureGroup> failures_of(const std::vector<const ResultRow*>& rows) {
  std::vector<FailureGroup> out;
  for (const ResultRow* r : rows) {
    if (r->outcome == "verified") continue;
    const std::string outcome = r->outcome.empty() ? "unknown" : r->outcome;
    auto it = std::find_if(out.begin(), out.end(),
                           [&](const FailureGroup& g) { return g.outcome == outcome; });
    if (it == out.end()) {
      out.push_back({outcome, 0, ""});
      it = out.end() - 1;
    }
    ++it->count;
    if (it->example.empty()) it->example = r->failure;
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const FailureGroup& a, const FailureGroup& b) { return a.count > b.count; });
  return out;
}

double run_span_s(const RunData& run) {
  if (run.spent_s > 0) return run.spent_s;
  double last = 0;
  for (const auto& r : run.rows) last = std::max(last, r.at_s);
  return last;
}

std::vector<WorkerUse> workers_of(const RunData& run) {
  std::vector<WorkerUse> out;
  for (const auto& r : run.rows) {
    if (r.evaluator.empty()) continue;
    auto it = std::find_if(out.begin(), out.end(),
                           [&](const WorkerUse& w) { return w.evaluator == r.evaluator; });
    if (it == out.end()) {
      out.push_back({r.evaluator});
      it = out.end() - 1;
    }
    ++it->evaluations;
    if (std::isfinite(r.wall_s) && r.wall_s > 0) it->busy_s += r.wall_s;
  }
  const double span = run_span_s(run);
  for (auto& w : out) w.idle_s = span > 0 ? std::max(0.0, span - w.busy_s) : -1;
  std::sort(out.begin(), out.end(),
            [](const WorkerUse& a, const WorkerUse& b) { return a.evaluator < b.evaluator; });
  return out;
}

std::vector<std::string> export_commands(const RunData& run, const UnitSummary& unit) {
  std::string base = "kiln export " + shell_word(unit.target);
  if (!run.export_args.empty()) base += " " + run.export_args;
  const std::string native = run.backend == "cpu" ? "cpp" : "cuda";
  if (!unit.shape.empty()) {  // a swept target exports as one dispatch table over its populations
    return {base + " --format " + native + " --to " + shell_word(unit.target + "-" + native)};
  }
  if (!unit.gpu_model.empty()) base += " --gpu-model " + shell_word(unit.gpu_model);
  std::vector<std::string> out;
  for (const std::string& format : {native, std::string("torch")})
    out.push_back(base + " --format " + format + " --to " + shell_word(unit.target + "-" + format));
  return out;
}

std::string unit_sentence(const UnitSummary& u) {
  std::string o = (u.state.empty() ? "state unknown" : u.state) + ". " +
                  std::to_string(u.evaluations) + " evaluations, " + std::to_string(u.failures) +
                  " failed, " + std::to_string(u.accepted) + " kept.";
  if (u.best_us > 0) {
    o += " Best " + time_us(u.best_us);
    if (u.seed_us > 0) o += ", " + speedup(u.seed_us / u.best_us) + " the seed's speed";
    if (u.fraction_of_floor > 0)
      o += ", " + percent(u.fraction_of_floor) + " of the physical floor";
    o += ".";
  }
  return o;
}

}  // namespace kiln::report
