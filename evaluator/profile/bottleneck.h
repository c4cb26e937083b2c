// The bottleneck class of a candidate from its profile (CUPTI counters and function attributes)
// and its roofline position, and the concrete next moves each class points at, tied to the
// built-in proposer's playbook tiers. Pure C++: no CUDA, so CI tests it on recorded metrics.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::profile {

// A candidate's profile as the classifier reads it; every value may be missing (a counter the
// chip does not support, CUPTI not permitted: then only the attributes are there).
struct ProfileMetrics {
  std::optional<double> dram_throughput_pct;     // of sustained peak, elapsed cycles
  std::optional<double> sm_throughput_pct;       // of sustained peak (busiest SM pipe or issue)
  std::optional<double> achieved_occupancy_pct;  // active warps over the SM's maximum
  std::optional<double> l1_hit_pct;
  std::optional<double> l2_hit_pct;
  std::optional<double> registers;    // per thread
  std::optional<double> local_bytes;  // per thread; > 0: spills or local arrays
  // Local loads and stores as % of the warp instructions executed: how often the kernel touches
  // that local memory (missing where the counters are not).
  std::optional<double> local_inst_pct;
  std::optional<double> theoretical_occupancy_pct;
  std::optional<double> block_threads;

  bool has_counters() const { return dram_throughput_pct || sm_throughput_pct; }
};

// Reads the "prof." values of EvaluationResult::metrics (metric_names.h); others are ignored.
ProfileMetrics metrics_from_map(const std::map<std::string, double>& metrics);

// Where the measured time sits against the device's measured ceilings: achieved over attainable,
// each 0..1 (a little above 1 is measurement noise). Missing when the ceiling is unknown.
struct Roofline {
  std::optional<double> memory_fraction;   // bytes/s over the copy bandwidth
  std::optional<double> compute_fraction;  // flops/s over the tensor-core rate
};

// The roofline from EvaluationResult::metrics ("bytes_per_s", "flops_per_s") and the ceilings the
// evaluator measured (0: unknown).
Roofline roofline_from(const std::map<std::string, double>& metrics, double bandwidth_bytes_per_s,
                       double matrix_flops_per_s);

enum class BottleneckClass {
  kUnknown,            // nothing to go on (no counters and no roofline)
  kMemoryNearPeak,     // memory-bound with DRAM near its peak: only fewer bytes help
  kMemoryFarFromPeak,  // memory-bound, DRAM well below peak: too few bytes in flight
  kCompute,            // the SM pipes (tensor cores, FMA) are the limit
  kLatency,            // neither memory nor compute busy: stalls, too little parallelism
  kOccupancy,          // memory side: too few warps resident (registers, smem, block size)
  kSpilling,           // the compiler put per-thread data in local memory
};

// "memory_near_peak", "memory_far_from_peak", "compute", "latency", "occupancy", "spilling",
// "unknown": the names on the wire (EvaluationResult::bottleneck, ParentInfo::bottleneck).
std::string_view class_name(BottleneckClass cls);
// The class of a name class_name() gives; kUnknown for anything else (empty included).
BottleneckClass parse_class(std::string_view name);

struct Bottleneck {
  BottleneckClass cls = BottleneckClass::kUnknown;
  std::string reason;  // the numbers that decided it, e.g. "DRAM 91% of peak, SM 23%"
};

// Classifies from the counters where there are any, else from the roofline alone.
Bottleneck classify(const ProfileMetrics& metrics, const Roofline& roofline);

// The built-in proposer's playbook tiers (agent/builtin_proposer.h, default_tiers).
enum class PlaybookTier { kBlockSize = 0, kMemoryAccess = 1, kCompute = 2, kAdvanced = 3 };

// One concrete next move: which tier's parameters to change, which way along their value lists
// (+1 larger, -1 smaller, 0 either), and the move in words for people and LLM prompts.
struct Move {
  PlaybookTier tier = PlaybookTier::kBlockSize;
  int direction = 0;
  std::string text;
};

// The moves a class points at, most promising first; empty for kUnknown.
std::vector<Move> hints(BottleneckClass cls);

// "memory_far_from_peak (DRAM 42% of peak, SM 12%); next: wider loads ...; more bytes ..." -- the
// class, its reason and its hints on one line (EvaluationResult::profile_note).
std::string describe(const Bottleneck& bottleneck);

}  // namespace kiln::profile
