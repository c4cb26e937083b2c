// One candidate's evaluation: static scan, compile, the five verification stages (smoke, shape x
// dtype sweep, adversarial values, bitwise determinism, edge shapes), honest timing with the timed
// outputs re-checked, and the physical-floor check. Backend-neutral: the device work happens in a
// sandbox child; inputs, reference and checks stay in this process.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "evaluator/backend.h"
#include "evaluator/reference.h"
#include "evaluator/sandbox.h"
#include "evaluator/tensor_data.h"
#include "shared/expr.h"
#include "shared/protocol.h"
#include "shared/target_spec.h"

namespace kiln::eval {

struct EvaluatorOptions {
  std::string kiln_binary;           // runs `kiln __sandbox`
  std::string cache_dir;             // compiled references, sandbox scratch files
  int gpu = 0;
  uint32_t phase_timeout_ms = 30000; // watchdog per sandbox call (one case, or one timing)
  uint32_t warmup = 3;
  uint32_t min_samples = 30;         // fewer let a short early run of quiet samples stop timing
  uint32_t max_samples = 400;
  uint32_t max_timing_ms = 1000;
  double target_noise_rel = 0.005;
  bool flush_l2 = true;
  uint32_t timing_sets = 2;          // input sets; from 2 the timed launches rotate their contents
  // Timings of one candidate before a sample set that is too noisy or bimodal (timing_problem)
  // is its verdict: a busy machine passes, a kernel whose work differs between launches is
  // caught every time. Each attempt gets fresh secret sites.
  uint32_t timing_attempts = 3;
  double throttle_fraction = 0.95;   // samples at a clock below this x the highest are flagged
  // Device ceilings for the floor check (0: unknown, no check); see ceilings.h.
  double bandwidth_bytes_per_s = 0;
  double matrix_flops_per_s = 0;
  double attainable_flops_per_s = 0;  // reporting only: fraction_of_attainable
  // Replaces the target's benchmark shape (tests and quick runs on small machines).
  std::optional<Shape> benchmark_override;
  // The most arena (host and device bytes) a timing shape may need; a larger one is refused
  // without running anything. 0: half the machine's memory, at most 32 GiB.
  size_t max_arena_bytes = 0;
  // Threads for the sampled-row references of timed outputs (0: default_reference_threads()).
  size_t reference_threads = 0;
  bool time = true;                  // false: verify only
  // After timing, profile every verified candidate: CUPTI counters and function attributes, the
  // bottleneck class and its next moves (EvaluationResult: "prof." metrics, bottleneck,
  // profile_note). CandidateSpec::profile asks for one candidate only. Needs `time`.
  bool profile = false;
};

// What to evaluate: a kernel text with its parameter values and the geometry expressions that
// launch it (from the spec's seed or template).
struct CandidateSpec {
  std::string label;                           // "seed", "template", a file name
  std::string source;
  std::string kernel_name;
  std::map<std::string, std::string> params;   // -D values (template parameters)
  const KernelSpec* geometry = nullptr;        // grid/block/shared_bytes expressions
  bool profile = false;                        // profile this one (EvaluateTask.profile)
  // Time at this shape (EvaluateTask.shape, a shape of a sweep) instead of the benchmark shape;
  // verification still runs at the target's own shapes. The sandbox's arena grows to fit it, up
  // to EvaluatorOptions::max_arena_bytes.
  std::optional<Shape> shape;
  // > 0: timing stops once the candidate is clearly slower than this (EvaluateTask.early_stop_us).
  double early_stop_us = 0;
};

// The candidate that runs `kernel` (a target's seed or template) as the target declares it: its
// source and entry point, launched with its geometry, with `params` as -D values (the seed's
// defines, or a configuration of the template).
inline CandidateSpec candidate_of(const KernelSpec& kernel, std::string label,
                                  std::map<std::string, std::string> params) {
  CandidateSpec c;
  c.label = std::move(label);
  c.source = kernel.source;
  c.kernel_name = kernel.kernel_name;
  c.params = std::move(params);
  c.geometry = &kernel;
  return c;
}

// Progress lines for humans ("smoke: passed (1 case)"); may be empty.
using ProgressFn = std::function<void(const std::string&)>;

class CandidateEvaluator {
 public:
  // `compiler` must be the backend's compiler (CachingCompiler-wrapped in daemons).
  static Result<std::unique_ptr<CandidateEvaluator>> create(const TargetSpec& target,
                                                            std::string backend,
                                                            Compiler& compiler,
                                                            EvaluatorOptions options);
  ~CandidateEvaluator();

  // Never fails as a call: every outcome (compile error, wrong answer, crash, hang, cheat) is in
  // the result, with every stage's verdict.
  proto::EvaluationResult evaluate(const CandidateSpec& candidate, DType timing_dtype,
                                   const ProgressFn& progress = {});

  // The compiles evaluate() will run for `candidate` (one per dtype), for a caller that wants to
  // start them early on a CompilePool so they overlap the device work of the candidate before
  // (results land in the compile cache). Fails for a source the static scan refuses.
  Result<std::vector<std::pair<DType, CompileRequest>>> compile_requests(
      const CandidateSpec& candidate, DType timing_dtype) const;

  const std::string& arch() const { return arch_; }
  const std::string& device_name() const { return device_name_; }

  class Impl;

 private:
  CandidateEvaluator() = default;
  std::unique_ptr<Impl> impl_;
  std::string arch_, device_name_;
};

// The compile of candidate `c` for one dtype: the backend's prelude, the parameters as -D
// macros, KILN_DTYPE, and the calling convention's signature. Does not scan the source.
Result<CompileRequest> build_compile_request(const TargetSpec& target, const std::string& backend,
                                             const std::string& arch, const CandidateSpec& c,
                                             DType dtype);

// Geometry of a launch from the spec's expressions at `shape` with `params`.
Result<LaunchGeometry> launch_geometry(const KernelSpec& spec, const Shape& shape, DType dtype,
                                       const std::map<std::string, std::string>& params);

// Whether a template configuration satisfies the spec's constraints at `shape`.
Result<bool> satisfies_constraints(const KernelSpec& spec, const Shape& shape, DType dtype,
                                   const std::map<std::string, std::string>& params);

// A template's constraints at one shape and dtype, parsed once: each check only changes the
// parameters' values (for_each_config over a whole space, the built-in proposer's neighbours).
// Not thread-safe.
class ConstraintCheck {
 public:
  // `parameters`: the names whose values admits() takes, in that order.
  ConstraintCheck(const KernelSpec& spec, const Shape& shape, DType dtype, std::vector<std::string> parameters);
  // Whether the configuration with values[i] for parameters[i] meets every constraint; false when
  // one cannot be evaluated, and for every configuration when the constraints do not parse.
  bool admits(const std::vector<double>& values);

 private:
  std::optional<ExprProgram> program_;
  std::vector<size_t> slots_;  // per parameter: its variable in program_
};

// Calls `take` with every combination of `spec`'s space (its defines plus one value of every
// parameter; the first parameter in name order changes fastest), constraints not checked, until
// `take` returns false.
void for_each_combination(const KernelSpec& spec,
                          const std::function<bool(const std::map<std::string, std::string>&)>& take);

// Calls `take` with each configuration of `spec`'s space (its defines plus one value of every
// parameter; the first parameter in name order changes fastest) that satisfies the constraints at
// `shape`, until `take` returns false.
void for_each_config(const KernelSpec& spec, const Shape& shape, DType dtype,
                     const std::function<bool(const std::map<std::string, std::string>&)>& take);

// Timing statistics over every sample. The SM clock only flags: `throttled` counts samples taken
// at a clock below throttle_fraction x the highest seen, and none is left out -- dropping them
// timed a power-hungry kernel at the moments it ran cool.
struct TimingStats {
  double median_us = 0, iqr_us = 0, min_us = 0, noise_rel = 0, sm_clock_mhz = 0;
  double min_clock_mhz = 0, max_clock_mhz = 0;
  uint32_t samples = 0, throttled = 0;
};
TimingStats timing_stats(const std::vector<double>& samples_us, const std::vector<double>& clocks_mhz,
                         double throttle_fraction);

// Median-relative interquartile range of `samples` (linear interpolation between order
// statistics); 1 for fewer than two samples or a median that is not positive. The sandbox child
// stops sampling on it; timing_problem refuses a set on it.
double relative_iqr(std::vector<double> samples);

// Why a sample set cannot give a verified median (docs/threats.md row 16), or "" when it can: a
// relative IQR above `max_noise_rel`, or two clusters -- at least `side_fraction` of the samples
// at or below some a, as many above gap_ratio x a, and at most `straggler_fraction` of them (two
// at least) in between. A kernel that does less work on some launches is timed on its cheap ones
// by a median; the stragglers are launches an interrupt or a clock change caught, which would
// otherwise fill the gap. The ratio is wide because honest kernels of a few microseconds do show
// two nearby modes (cache and TLB state after the flush: 6.3 and 10.3 us for a 300 x 64 row sum
// on the cpu backend).
std::string timing_problem(const std::vector<double>& samples_us, double max_noise_rel = 1.0,
                           double gap_ratio = 1.5, double side_fraction = 0.2,
                           double straggler_fraction = 0.1);

// What timing_problem says of one timing, with the machine's share set apart. Where the backend
// probes the machine before each sample (Device::machine_probe_us: `probes_us`, one per sample,
// all positive), a sample whose probe took more than busy_ratio x the probes' lower quartile was
// taken while other processes loaded the machine. Such a sample can be set aside where that
// slowdown explains it: the sample is at most `slack` x the quiet samples' median scaled by its
// probe over the quartile. When the whole set has a problem and the rest -- at least `min_kept`,
// and a quarter of the set -- has none, the problem was the machine's: `kept` lists the samples
// that count (by index) and `busy` keeps what the whole set was refused for. A kernel whose own
// work differs between launches gains nothing: the probe runs before it, so its expensive
// launches fall at quiet moments too, and where they fall at busy ones they are slower than the
// machine explains. A problem that stands says how many samples the probe saw busy.
inline constexpr double kBusyProbeRatio = 1.3;
inline constexpr double kBusySlowdownSlack = 1.5;
struct SampleVerdict {
  std::string problem;       // "" when the set (or its kept part) gives a time
  std::vector<size_t> kept;  // empty: every sample counts
  std::string busy;          // the whole set's problem, where setting samples aside cleared it
};
SampleVerdict judge_samples(const std::vector<double>& samples_us,
                            const std::vector<double>& probes_us, size_t min_kept,
                            double busy_ratio = kBusyProbeRatio, double slack = kBusySlowdownSlack);

}  // namespace kiln::eval
