// What the report's figures and tables are computed from, derived once from RunData so that the
// HTML page and the markdown summary say the same thing: a unit's rows, the best time after each
// result, the resource that bounds the kernel, the best's lineage, failures by reason, the
// evaluators' use of the run's time and the commands that export the winner. docs/report.md says
// how each is computed.
#pragma once

#include <string>
#include <vector>

#include "report/run_data.h"

namespace kiln::report {

// "rmsnorm @ NVIDIA H100 80GB HBM3", or just the target for a population of any GPU; a sweep's
// population names its shape after the target ("rmsnorm M=512,N=4096 @ ...").
std::string unit_label(const UnitSummary& unit);
// "converged: .... 39 evaluations, 0 failed, 9 kept. Best 49.8 µs, 2.54x the seed's speed, 91% of
// the physical floor." (plain text: the caller escapes it for its format)
std::string unit_sentence(const UnitSummary& unit);

// The unit's name in chart names: "rmsnorm@NVIDIA H100 80GB HBM3" or "rmsnorm" (a sweep's:
// "rmsnorm-M=512,N=4096@...", as the coordinator names it).
std::string unit_key(const UnitSummary& unit);

// The unit's results, in arrival order (the evaluation number of rows[i] is i + 1).
std::vector<const ResultRow*> rows_of(const RunData& run, const UnitSummary& unit);

bool is_timed(const ResultRow& row);  // it has a median time
bool is_kept(const ResultRow& row);   // the search kept or crowned it

// The unit's best time after each of `rows` (aligned with them; 0 before the first best). With
// verdicts, the best is the seed's baseline and then each crowned re-time, as the search holds
// it; a folder of an older kiln has no verdicts, and then it is the fastest verified time so far.
std::vector<double> best_so_far(const std::vector<const ResultRow*>& rows);

// The resource whose peak sets the unit's physical floor.
struct Roof {
  bool bandwidth = true;  // bytes against peak_bytes_per_s; else flops against peak_flops_per_s
  double peak = 0;        // the highest peak the unit's evaluators measured; 0 when unknown
};
Roof roof_of(const std::vector<const ResultRow*>& rows);
double achieved(const ResultRow& row, const Roof& roof);  // bytes/s or flop/s; 0 when unknown

// One candidate on the way from the seed to the best.
struct LineageStep {
  std::string candidate_id;
  std::string op;
  std::string model;
  double median_us = 0;  // its last verified time (a crowned candidate's re-time)
  double gain = 0;       // parent's time / its time; 0 for the first step
};
struct Lineage {
  std::vector<LineageStep> steps;  // the seed (or the oldest ancestor found) first, the best last
  std::string note;                // why the chain stops short of a seed; "" when it reaches one
};
Lineage lineage_of(const UnitSummary& unit, const std::vector<const ResultRow*>& rows);

// Results that did not verify, by outcome, the most frequent first.
struct FailureGroup {
  std::string outcome;
  uint64_t count = 0;
  std::string example;  // the first one's failure text
};
std::vector<FailureGroup> failures_of(const std::vector<const ResultRow*>& rows);

// How an evaluator spent the run: evaluations, seconds on tasks, and the rest of the run's span.
struct WorkerUse {
  std::string evaluator;
  uint64_t evaluations = 0;
  double busy_s = 0;   // the sum of its tasks' wall times
  double idle_s = -1;  // the run's span less busy_s, at least 0; < 0 when the span is unknown
};
std::vector<WorkerUse> workers_of(const RunData& run);

// The run's span for idle times: its search time, else the last result's arrival; 0 if unknown.
double run_span_s(const RunData& run);

// The `kiln export` commands that write the unit's best: a C++ (cuda or cpp) and a torch export.
std::vector<std::string> export_commands(const RunData& run, const UnitSummary& unit);

}  // namespace kiln::report
