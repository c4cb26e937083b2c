// The report's charts, as svg::Chart values built from RunData: per unit the best time against
// wall time and against evaluations and the throughput against the ceiling; for the farm the
// evaluations per evaluator over time. html.cc renders them; tests count their points.
#pragma once

#include <string>
#include <vector>

#include "report/run_data.h"
#include "report/svg.h"

namespace kiln::report {

// Chart names (svg data-plot): "<unit key>/time", "<unit key>/evals", "<unit key>/roofline",
// and "farm/workers" (unit_key in analysis.h).
std::string chart_name(const UnitSummary& unit, const std::string& kind);
constexpr const char* kWorkersChart = "farm/workers";

// Whether any of the rows knows when it arrived (results of an older kiln do not).
bool any_arrival_time(const std::vector<const ResultRow*>& rows);

// Every timed result at its arrival time (x: seconds since the start; y: median, log scale), the
// kept and crowned ones marked, the best so far as a step line, the physical floor when known.
svg::Chart time_chart(const UnitSummary& unit, const std::vector<const ResultRow*>& rows);

// The same against the evaluation number (the result's 1-based index within the unit).
svg::Chart evals_chart(const UnitSummary& unit, const std::vector<const ResultRow*>& rows);

// Each timed candidate's achieved throughput in the unit's bound resource (bytes/s or flop/s)
// against the evaluation number, with the measured peak as the roof.
svg::Chart roofline_chart(const UnitSummary& unit, const std::vector<const ResultRow*>& rows);

// Cumulative evaluations of each evaluator against arrival time, one colour per evaluator.
svg::Chart workers_chart(const RunData& run);

}  // namespace kiln::report
