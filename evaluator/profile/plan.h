// A profile plan: where a whole program spends its GPU time, per kernel and per kiln target type,
// with Amdahl's-law gains, as `kiln profile` writes it to plan.json and `kiln run --plan` reads it
// (format in docs/profile.md). Amdahl: a part taking fraction f of the time, made s times faster,
// speeds the whole up by S = 1 / ((1 - f) + f / s).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "evaluator/profile/trace.h"
#include "shared/status.h"
#include "shared/target_spec.h"

namespace kiln::profile {

// End-to-end speedup when a fraction `share` (0..1) of the time gets `speedup` times faster.
double amdahl_speedup(double share, double speedup);

struct PlanKernel {
  std::string name;
  std::string mangled;
  std::string target;  // "" when unmapped
  uint64_t calls = 0;
  uint64_t total_ns = 0;
  uint64_t min_ns = 0;
  uint64_t max_ns = 0;
  double share = 0;               // of the program's total GPU time
  double end_to_end_speedup = 1;  // amdahl_speedup(share, Plan::speedup)
};

// A shape a target's kernels ran at in the program, recovered from their NVTX ranges
// (op_shapes.h), with the calls and GPU time of that target's kernels at it.
struct PlanShape {
  Shape shape;
  uint64_t calls = 0;
  uint64_t total_ns = 0;
};

struct PlanTarget {
  std::string target;
  uint64_t kernels = 0;  // distinct kernel names mapped to it
  uint64_t calls = 0;
  uint64_t total_ns = 0;
  double share = 0;
  double end_to_end_speedup = 1;
  std::vector<PlanShape> shapes;  // most time first; empty when no range gave one
};

struct Plan {
  static constexpr int kFormatVersion = 1;
  std::vector<std::string> command;  // the profiled program; empty for --from-traces
  double speedup = 2.0;              // the per-kernel speedup the gains assume
  uint64_t total_gpu_ns = 0;
  uint64_t total_calls = 0;
  uint64_t processes = 0;            // trace files read
  double unmapped_share = 0;
  std::vector<PlanTarget> targets;   // most time first
  std::vector<PlanKernel> kernels;   // most time first
};

// Builds a plan from aggregated kernels (aggregate_kernels's order is kept). `speedup` > 0.
Plan make_plan(const std::vector<KernelStat>& stats, double speedup, uint64_t processes);

// Fills each plan target's `shapes` from the kernels' NVTX ranges (shape_from_range for the
// kernel's own target); returns how many kernel records had a range at all.
uint64_t add_plan_shapes(const std::vector<KernelRecord>& kernels, Plan* plan);

// plan.json text (pretty-printed JSON object).
std::string plan_to_json(const Plan& plan);
Status write_plan(const Plan& plan, const std::string& path);

// Parses plan.json text strictly: every field typed and in range, unknown keys refused, shares
// summing to at most 1; errors name `source` and the field ("plan.json: field 'targets[2].share':
// ...").
Result<Plan> parse_plan(const std::string& text, const std::string& source);
Result<Plan> load_plan(const std::string& path);

// What `kiln run --plan` weights targets by: target type -> its share of the program's GPU time,
// for every target with a share above zero.
std::map<std::string, double> target_weights(const Plan& plan);

}  // namespace kiln::profile
