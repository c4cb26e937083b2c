// classify(): the order of the rules is the decision. A kernel at the DRAM roof is called that
// before anything else (no other fix buys much there); then spills touched often enough to
// distort every other counter; then which unit the roofline says should limit it and how busy
// that unit is; then occupancy; what is left is latency. hints(): the moves per class, tied to
// playbook tiers.
#include "evaluator/profile/bottleneck.h"

#include <algorithm>
#include <cstdio>

#include "evaluator/profile/metric_names.h"

namespace kiln::profile {
namespace {

// A unit at or above this % of its sustained peak is saturated in practice: a streaming copy on
// H100/H200 reaches about 90% of the DRAM peak ncu reports, so 80% leaves room for noise and for
// kernels that must also read a little twice. The same cut applies to the roofline fractions
// (achieved over the *measured* copy bandwidth).
constexpr double kNearPeakPct = 80;
// Nsight Compute's speed-of-light rule: a unit above 60% of peak is what limits the kernel; when
// neither memory nor compute reaches it, the kernel is latency-bound.
constexpr double kBoundPct = 60;
// Below this achieved occupancy (% of the SM's warp slots) too few warps hide memory and pipe
// latency for typical kernels (16 of 64 warps on sm_90).
constexpr double kLowAchievedOccupancyPct = 25;
// A theoretical occupancy below this means registers, shared memory or the block size cap the
// resident warps before the kernel runs at all (32 of 64 warps on sm_90).
constexpr double kLowTheoreticalOccupancyPct = 50;
// Local memory per thread means the compiler spilled registers or placed an indexed array there;
// each access costs L1/L2 traffic. Where the instruction counters are missing, any amount counts.
constexpr double kSpillBytes = 1;
// Where they are there, local memory is what limits the kernel only when its loads and stores are
// at least this % of the instructions executed: a spill in the hot loop (a warp tile too large
// for its registers) reaches several %, while a persistent tensor-core kernel that parks a few
// values across its tile loop (the H200 flash_attention IMPL 2: 52 bytes per thread, saved once
// per tile around thousands of MMA-loop instructions) stays far below, and shrinking its tiles
// would only lose the reuse that makes it fast.
constexpr double kSpillInstPct = 1;

std::optional<double> get(const std::map<std::string, double>& m, const char* key) {
  auto it = m.find(metric_key(key));
  if (it == m.end()) return std::nullopt;
  return it->second;
}

std::string pct(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.0f%%", v);
  return buf;
}

}  // namespace

ProfileMetrics metrics_from_map(const std::map<std::string, double>& m) {
  ProfileMetrics p;
  p.dram_throughput_pct = get(m, "dram_throughput_pct");
  p.sm_throughput_pct = get(m, "sm_throughput_pct");
  p.achieved_occupancy_pct = get(m, "achieved_occupancy_pct");
  p.l1_hit_pct = get(m, "l1_hit_pct");
  p.l2_hit_pct = get(m, "l2_hit_pct");
  p.registers = get(m, kRegistersKey);
  p.local_bytes = get(m, kLocalBytesKey);
  const auto executed = get(m, "inst_executed");
  const auto loads = get(m, "local_load_inst");
  const auto stores = get(m, "local_store_inst");
  if (executed && loads && stores && *executed > 0) {
    p.local_inst_pct = 100 * (*loads + *stores) / *executed;
  }
  p.theoretical_occupancy_pct = get(m, kTheoreticalOccupancyKey);
  p.block_threads = get(m, kBlockThreadsKey);
  return p;
}

Roofline roofline_from(const std::map<std::string, double>& metrics, double bandwidth_bytes_per_s,
                       double matrix_flops_per_s) {
  Roofline r;
  auto bytes = metrics.find("bytes_per_s");
  if (bytes != metrics.end() && bandwidth_bytes_per_s > 0) {
    r.memory_fraction = bytes->second / bandwidth_bytes_per_s;
  }
  auto flops = metrics.find("flops_per_s");
  if (flops != metrics.end() && matrix_flops_per_s > 0) {
    r.compute_fraction = flops->second / matrix_flops_per_s;
  }
  return r;
}

std::string_view class_name(BottleneckClass cls) {
  switch (cls) {
    case BottleneckClass::kMemoryNearPeak:
      return "memory_near_peak";
    case BottleneckClass::kMemoryFarFromPeak:
      return "memory_far_from_peak";
    case BottleneckClass::kCompute:
      return "compute";
    case BottleneckClass::kLatency:
      return "latency";
    case BottleneckClass::kOccupancy:
      return "occupancy";
    case BottleneckClass::kSpilling:
      return "spilling";
    case BottleneckClass::kUnknown:
      break;
  }
  return "unknown";
}

BottleneckClass parse_class(std::string_view name) {
  for (BottleneckClass c : {BottleneckClass::kMemoryNearPeak, BottleneckClass::kMemoryFarFromPeak,
                            BottleneckClass::kCompute, BottleneckClass::kLatency,
                            BottleneckClass::kOccupancy, BottleneckClass::kSpilling}) {
    if (class_name(c) == name) return c;
  }
  return BottleneckClass::kUnknown;
}

Bottleneck classify(const ProfileMetrics& p, const Roofline& roof) {
  // How busy each side is, in % of peak: the counters where measured, else the roofline.
  std::optional<double> memory = p.dram_throughput_pct;
  std::optional<double> compute = p.sm_throughput_pct;
  if (!memory && roof.memory_fraction) memory = 100 * *roof.memory_fraction;
  if (!compute && roof.compute_fraction) compute = 100 * *roof.compute_fraction;
  if (!memory && !compute) return {BottleneckClass::kUnknown, "no counters and no roofline"};
  const double mem = memory.value_or(0);
  const double sm = compute.value_or(0);

  // Which side should limit the kernel: the roofline (the target's bytes and flops against the
  // device's ceilings) when both fractions are known -- it speaks for the work, not for how the
  // candidate happens to do it -- else whichever unit is busier.
  bool memory_side = mem >= sm;
  if (roof.memory_fraction && roof.compute_fraction) {
    memory_side = *roof.memory_fraction >= *roof.compute_fraction;
  }

  std::string numbers = "DRAM " + (memory ? pct(mem) : std::string("?")) + " of peak, SM " +
                        (compute ? pct(sm) : std::string("?"));
  if (roof.memory_fraction)
    numbers += ", " + pct(100 * *roof.memory_fraction) + " of copy bandwidth";
  if (roof.compute_fraction)
    numbers += ", " + pct(100 * *roof.compute_fraction) + " of tensor-core rate";
  if (p.achieved_occupancy_pct) numbers += ", occupancy " + pct(*p.achieved_occupancy_pct);
  if (p.theoretical_occupancy_pct)
    numbers += " (theoretical " + pct(*p.theoretical_occupancy_pct) + ")";

  // Near the memory roof: whatever else is wrong, only fewer bytes makes it faster. The counter
  // decides when there is one; the roofline fraction (of the measured copy) stands in otherwise.
  const double memory_level =
      p.dram_throughput_pct ? *p.dram_throughput_pct : 100 * roof.memory_fraction.value_or(0);
  if (memory_side && memory_level >= kNearPeakPct) {
    return {BottleneckClass::kMemoryNearPeak, numbers};
  }
  if (p.local_bytes && *p.local_bytes >= kSpillBytes) {
    char buf[96];
    std::snprintf(buf, sizeof(buf), "%.0f bytes of local memory per thread", *p.local_bytes);
    std::string local = buf;
    if (p.local_inst_pct) {
      std::snprintf(buf, sizeof(buf), ", its loads and stores %.2g%% of instructions",
                    *p.local_inst_pct);
      local += buf;
    }
    if (!p.local_inst_pct || *p.local_inst_pct >= kSpillInstPct) {
      if (p.registers) {
        std::snprintf(buf, sizeof(buf), ", %.0f registers", *p.registers);
        local += buf;
      }
      return {BottleneckClass::kSpilling, local + "; " + numbers};
    }
    numbers += "; " + local;  // touched too rarely to limit it: the other rules decide
  }
  if (!memory_side && sm >= kBoundPct) return {BottleneckClass::kCompute, numbers};
  const bool low_occupancy =
      (p.theoretical_occupancy_pct && *p.theoretical_occupancy_pct < kLowTheoreticalOccupancyPct) ||
      (p.achieved_occupancy_pct && *p.achieved_occupancy_pct < kLowAchievedOccupancyPct);
  // Few resident warps limit a kernel that needs many in flight to cover DRAM latency: the
  // memory side. On the compute side (tensor-core tiles) they are the design -- one large tile
  // per SM is how Hopper GEMMs reach their peak, and smaller tiles lose reuse -- so there a
  // kernel below both bounds is latency-bound (its pipes wait on loads), not occupancy-bound.
  // Seen on H100 sweeps of matmul, flash_attention and fused_mlp: every fast configuration has
  // one block per SM, and "occupancy" steered the search to smaller tiles
  // (bench/results/2026-11-24-H100-guidance-ablation.md).
  if (low_occupancy && memory_side && std::max(mem, sm) < kBoundPct) {
    return {BottleneckClass::kOccupancy, numbers};
  }
  // Memory-side work below the roof: too few bytes in flight to cover DRAM latency, or more
  // bytes moved than the work needs. A compute-side kernel whose DRAM is the busy unit anyway
  // reuses too little and lands here too.
  if (memory_side || mem >= kBoundPct) return {BottleneckClass::kMemoryFarFromPeak, numbers};
  if (sm >= kBoundPct) return {BottleneckClass::kCompute, numbers};
  return {BottleneckClass::kLatency, numbers};
}

std::vector<Move> hints(BottleneckClass cls) {
  using T = PlaybookTier;
  switch (cls) {
    case BottleneckClass::kMemoryNearPeak:
      return {{T::kMemoryAccess, 0,
               "move fewer bytes: read each input once (keep the row in registers or shared "
               "memory between passes)"},
              {T::kAdvanced, 0,
               "at the DRAM roof launch parameters buy little: a structural variant that moves "
               "fewer bytes (fusion, fewer passes)"},
              {T::kBlockSize, 1, "trim the tail: fewer, larger blocks (more rows per block)"}};
    case BottleneckClass::kMemoryFarFromPeak:
      return {{T::kMemoryAccess, 1, "wider loads: 16-byte vector accesses (VEC, ELEMS up)"},
              {T::kMemoryAccess, 1,
               "more bytes in flight per thread: unroll independent loads (UNROLL, ITEMS up)"},
              {T::kBlockSize, 1, "more resident warps to cover DRAM latency (more rows per block)"},
              {T::kCompute, 1, "fewer passes over memory; deeper pipelining of loads (STAGES up)"}};
    case BottleneckClass::kCompute:
      return {{T::kCompute, 1,
               "keep the tensor cores fed: deeper pipeline (STAGES up), larger warp tiles"},
              {T::kAdvanced, 0, "a tensor-core/TMA variant (IMPL, TMA) or another schedule"},
              {T::kBlockSize, 1, "larger tiles for more reuse per byte loaded (BM, BN up)"}};
    case BottleneckClass::kLatency:
      return {{T::kBlockSize, 1,
               "more work in flight: more threads per block, or larger tiles on a tensor-core "
               "kernel (BLOCK, WARPS, BM, BN up)"},
              {T::kMemoryAccess, 1,
               "more independent work per thread (ILP: UNROLL, ITEMS up) to hide stalls"},
              {T::kCompute, 1, "overlap loads with compute (STAGES up, software pipelining)"}};
    case BottleneckClass::kOccupancy:
      return {{T::kBlockSize, -1,
               "smaller blocks or tiles so more blocks fit per SM (BLOCK, BM, BN down)"},
              {T::kCompute, -1, "less shared memory per block (STAGES down, smaller warp tiles)"},
              {T::kMemoryAccess, -1, "fewer registers per thread (ELEMS, UNROLL down)"}};
    case BottleneckClass::kSpilling:
      return {{T::kMemoryAccess, -1,
               "hold less per thread: fewer elements or unrolled loads (ELEMS, UNROLL down)"},
              {T::kBlockSize, -1, "smaller tiles: fewer accumulators per thread (BM, BN down)"},
              {T::kCompute, -1, "smaller warp tiles or fewer stages (WM, WN, STAGES down)"}};
    case BottleneckClass::kUnknown:
      break;
  }
  return {};
}

std::string describe(const Bottleneck& b) {
  std::string out = std::string(class_name(b.cls));
  if (!b.reason.empty()) out += " (" + b.reason + ")";
  std::vector<Move> moves = hints(b.cls);
  for (size_t i = 0; i < moves.size(); ++i) out += (i == 0 ? "; next: " : "; ") + moves[i].text;
  return out;
}

}  // namespace kiln::profile
