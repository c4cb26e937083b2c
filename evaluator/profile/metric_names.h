// The one list of profile values kiln records: the CUPTI counters it asks the Range Profiler for
// (by their Nsight Compute names), the function attributes it reads from the driver, and the short
// keys under which both go into EvaluationResult::metrics ("prof." + key). No CUDA needed.
#pragma once

#include <string>
#include <string_view>

namespace kiln::profile {

// Prefix of every profile value in EvaluationResult::metrics.
inline constexpr std::string_view kMetricPrefix = "prof.";

// A hardware counter metric and the key kiln stores it under.
struct CounterMetric {
  const char* cupti_name;  // as CUPTI and `ncu --metrics` spell it
  const char* key;         // without kMetricPrefix
};

// Asked for on every profile; those the chip does not support are left out (and named in the
// profile's notice). Percentages are of the unit's sustained peak, as ncu reports them.
inline constexpr CounterMetric kCounterMetrics[] = {
    {"gpu__time_duration.sum", "duration_ns"},
    {"dram__throughput.avg.pct_of_peak_sustained_elapsed", "dram_throughput_pct"},
    {"sm__throughput.avg.pct_of_peak_sustained_elapsed", "sm_throughput_pct"},
    {"sm__warps_active.avg.pct_of_peak_sustained_active", "achieved_occupancy_pct"},
    {"l1tex__t_sector_hit_rate.pct", "l1_hit_pct"},
    {"lts__t_sector_hit_rate.pct", "l2_hit_pct"},
    {"dram__bytes.sum", "dram_bytes"},
    // Warp instructions executed, and those that load or store local memory: whether local memory
    // the compiler placed is touched in the hot loop (spilling) or a few times per tile.
    {"smsp__inst_executed.sum", "inst_executed"},
    {"smsp__inst_executed_op_local_ld.sum", "local_load_inst"},
    {"smsp__inst_executed_op_local_st.sum", "local_store_inst"},
};

// Keys of the values that come from the function's attributes and the launch (no counters).
inline constexpr const char* kRegistersKey = "registers";               // per thread
inline constexpr const char* kLocalBytesKey = "local_bytes";            // per thread: spills
inline constexpr const char* kStaticSharedKey = "static_shared_bytes";  // per block
inline constexpr const char* kDynamicSharedKey = "dynamic_shared_bytes";
inline constexpr const char* kBlockThreadsKey = "block_threads";
inline constexpr const char* kBlocksPerSmKey = "blocks_per_sm";  // resident, from the occupancy API
inline constexpr const char* kTheoreticalOccupancyKey = "theoretical_occupancy_pct";

// "prof." + key.
inline std::string metric_key(std::string_view key) {
  return std::string(kMetricPrefix) + std::string(key);
}

// The key of a CUPTI metric name, or nullptr when kiln does not record it.
inline const char* key_of_cupti_metric(std::string_view cupti_name) {
  for (const CounterMetric& m : kCounterMetrics) {
    if (cupti_name == m.cupti_name) return m.key;
  }
  return nullptr;
}

}  // namespace kiln::profile
