// Builds the report's charts from the rows (see charts.h).
#include "report/charts.h"

#include <algorithm>
#include <map>

#include "report/analysis.h"
#include "report/format.h"

namespace kiln::report {
namespace {

constexpr int kColours = 8;  // c0..c7 in html.cc's style sheet

// What a reader sees when hovering a point: which evaluation, what the search made of it.
std::string tooltip(const ResultRow& r, size_t number, const std::string& value) {
  std::string t = "#" + std::to_string(number) + " " + (r.kind.empty() ? "result" : r.kind);
  if (!r.verdict.empty()) t += ", " + r.verdict;
  t += ": " + value;
  if (r.at_s >= 0) t += " at " + with_unit(r.at_s, Unit::kSeconds);
  t += "\n" + r.candidate_id.substr(0, 12);
  if (!r.op.empty()) t += " by " + r.op;
  if (!r.model.empty()) t += " (" + r.model + ")";
  if (!r.params.empty()) t += "\n" + params_text(r.params);
  return t;
}

std::string point_class(const ResultRow& r) {
  if (is_kept(r)) return "kept";
  if (r.kind == "seed" || r.verdict == "baseline") return "seed";
  return "";
}

// The shared part of the two best-time charts; `x_of` gives a row's x (or < 0 to leave it out).
template <typename XOf>
svg::Chart best_chart(const UnitSummary& unit, const std::vector<const ResultRow*>& rows,
                      XOf x_of) {
  svg::Chart c;
  c.y = {"median time (log scale)", Unit::kMicroseconds, svg::Scale::kLog10, false};
  svg::Series points{"c0", {}, true, false};
  svg::Series best{"best", {}, false, true};
  const std::vector<double> so_far = best_so_far(rows);
  for (size_t i = 0; i < rows.size(); ++i) {
    const ResultRow& r = *rows[i];
    const double x = x_of(r, i);
    if (x < 0) continue;
    if (is_timed(r))
      points.points.push_back({x, r.median_us, point_class(r),
                               tooltip(r, i + 1, with_unit(r.median_us, Unit::kMicroseconds))});
    if (so_far[i] > 0) best.points.push_back({x, so_far[i], "", ""});
  }
  c.series = {best, points};
  const double floor_us = unit.fraction_of_floor * unit.best_us;
  if (floor_us > 0)
    c.lines.push_back(
        {floor_us, "physical floor " + with_unit(floor_us, Unit::kMicroseconds), "floor"});
  c.legend = {{"timed result", "c0", svg::LegendEntry::Shape::kDot, ""},
              {"seed", "c0", svg::LegendEntry::Shape::kDot, "seed"},
              {"kept or crowned", "c0", svg::LegendEntry::Shape::kDot, "kept"},
              {"best so far", "best", svg::LegendEntry::Shape::kLine, ""}};
  if (floor_us > 0)
    c.legend.push_back({"physical floor", "floor", svg::LegendEntry::Shape::kDash, ""});
  return c;
}

}  // namespace

std::string chart_name(const UnitSummary& unit, const std::string& kind) {
  return unit_key(unit) + "/" + kind;
}

bool any_arrival_time(const std::vector<const ResultRow*>& rows) {
  for (const ResultRow* r : rows)
    if (r->at_s >= 0) return true;
  return false;
}

svg::Chart time_chart(const UnitSummary& unit, const std::vector<const ResultRow*>& rows) {
  svg::Chart c = best_chart(unit, rows, [](const ResultRow& r, size_t) { return r.at_s; });
  c.name = chart_name(unit, "time");
  c.description = "Best time against wall time for " + unit_label(unit);
  c.x = {"search time since the run began", Unit::kSeconds, svg::Scale::kLinear, true};
  return c;
}

svg::Chart evals_chart(const UnitSummary& unit, const std::vector<const ResultRow*>& rows) {
  svg::Chart c = best_chart(unit, rows, [](const ResultRow&, size_t i) { return i + 1.0; });
  c.name = chart_name(unit, "evals");
  c.description = "Best time against evaluations for " + unit_label(unit);
  c.x = {"evaluation number", Unit::kPlain, svg::Scale::kLinear, true, true};
  return c;
}

svg::Chart roofline_chart(const UnitSummary& unit, const std::vector<const ResultRow*>& rows) {
  const Roof roof = roof_of(rows);
  const Unit unit_of = roof.bandwidth ? Unit::kBytesPerSecond : Unit::kFlopsPerSecond;
  svg::Chart c;
  c.name = chart_name(unit, "roofline");
  c.description = "Achieved " + std::string(roof.bandwidth ? "bandwidth" : "compute throughput") +
                  " against the measured peak for " + unit_label(unit);
  c.x = {"evaluation number", Unit::kPlain, svg::Scale::kLinear, true, true};
  c.y = {roof.bandwidth ? "achieved bandwidth (log scale)" : "achieved throughput (log scale)",
         unit_of, svg::Scale::kLog10, false};
  svg::Series points{"c1", {}, true, false};
  for (size_t i = 0; i < rows.size(); ++i) {
    const ResultRow& r = *rows[i];
    const double v = achieved(r, roof);
    if (!is_timed(r) || v <= 0) continue;
    std::string what = with_unit(v, unit_of);
    if (roof.peak > 0) what += " (" + percent(v / roof.peak) + " of peak)";
    points.points.push_back({i + 1.0, v, point_class(r), tooltip(r, i + 1, what)});
  }
  c.series = {points};
  c.legend = {{"timed candidate", "c1", svg::LegendEntry::Shape::kDot, ""},
              {"kept or crowned", "c1", svg::LegendEntry::Shape::kDot, "kept"}};
  if (roof.peak > 0) {
    c.lines.push_back({roof.peak, "peak " + with_unit(roof.peak, unit_of), "roof"});
    c.legend.push_back({"measured peak (the roof)", "roof", svg::LegendEntry::Shape::kDash, ""});
  }
  return c;
}

svg::Chart workers_chart(const RunData& run) {
  svg::Chart c;
  c.name = kWorkersChart;
  c.description = "Cumulative evaluations of each evaluator against search time";
  c.x = {"search time since the run began", Unit::kSeconds, svg::Scale::kLinear, true};
  c.y = {"evaluations done", Unit::kPlain, svg::Scale::kLinear, true, true};
  std::vector<const ResultRow*> rows;
  for (const auto& r : run.rows)
    if (!r.evaluator.empty() && r.at_s >= 0) rows.push_back(&r);
  std::stable_sort(rows.begin(), rows.end(),
                   [](const ResultRow* a, const ResultRow* b) { return a->at_s < b->at_s; });
  // Evaluators in name order, so that colours do not depend on who answered first.
  std::map<std::string, size_t> index;
  for (const ResultRow* r : rows) index.emplace(r->evaluator, 0);
  size_t k = 0;
  for (auto& [name, i] : index) {
    i = k++;
    const std::string cls = "c" + std::to_string(i % kColours);
    c.series.push_back({cls, {}, true, true});
    c.legend.push_back({name, cls, svg::LegendEntry::Shape::kDot, ""});
  }
  std::vector<size_t> done(index.size(), 0);
  for (const ResultRow* r : rows) {
    const size_t i = index[r->evaluator];
    ++done[i];
    const std::string what = r->evaluator + ": evaluation " + std::to_string(done[i]) + " (" +
                             r->target + ", " + (r->outcome.empty() ? "?" : r->outcome) + ") at " +
                             with_unit(r->at_s, Unit::kSeconds);
    c.series[i].points.push_back({r->at_s, static_cast<double>(done[i]), "", what});
  }
  return c;
}

}  // namespace kiln::report
