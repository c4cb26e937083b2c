// Kernel traces of whole programs (`kiln profile`): reading the JSON-lines files that
// libkiln_inject.so writes (one per process, format in docs/profile.md) and aggregating their
// kernel records by kernel name. Reading is strict per line and lenient per file: a bad line is
// reported with file:line and skipped, so one torn write does not lose a whole run.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "shared/status.h"

namespace kiln::profile {

// One kernel execution as CUPTI recorded it.
struct KernelRecord {
  std::string name;     // demangled where possible
  std::string mangled;  // empty when the name was not mangled
  uint64_t start_ns = 0;
  uint64_t end_ns = 0;
  uint32_t device = 0;
  uint32_t stream = 0;
  uint64_t correlation = 0;
  // The innermost NVTX range open on the launching thread when it was launched ("" when none):
  // PyTorch's operator and input sizes under emit_nvtx(record_shapes=True) (op_shapes.h).
  std::string range;
  int64_t grid[3] = {0, 0, 0};
  int64_t block[3] = {0, 0, 0};
  uint64_t duration_ns() const { return end_ns - start_ns; }
};

// The longest kernel a trace record may claim: a day. Records are read from files anyone can
// write, and sums of durations must not wrap (they also saturate: add_ns).
inline constexpr uint64_t kMaxKernelNs = 86'400'000'000'000ULL;

// a + b, or UINT64_MAX where that would wrap.
inline uint64_t add_ns(uint64_t a, uint64_t b) { return b > UINT64_MAX - a ? UINT64_MAX : a + b; }

// What one process's trace file says about the process.
struct TraceProcess {
  std::string file;
  int64_t pid = 0;
  std::string exe;
  uint64_t kernels = 0;    // kernel lines read
  uint64_t dropped = 0;    // records CUPTI dropped (buffers full)
  bool ended = false;      // the "end" line is there: the process exited normally
  std::vector<std::string> errors;  // "error" lines the injection library wrote
};

struct TraceSet {
  std::vector<KernelRecord> kernels;
  std::vector<TraceProcess> processes;
  std::vector<std::string> warnings;  // "file:line: why", one per skipped line or odd file
};

// Appends the records of one trace file to `set`. Fails only when the file cannot be read;
// bad lines become warnings.
Status read_trace_file(const std::string& path, TraceSet* set);

// Reads every kiln-trace-*.jsonl (and any other *.jsonl) file of `dir`, in name order. Fails when
// the folder cannot be listed; a folder with no trace files gives an empty set.
Result<TraceSet> read_trace_dir(const std::string& dir);

// Kernels with the same name, together.
struct KernelStat {
  std::string name;
  std::string mangled;
  std::string target;  // kiln target type (trace_targets.h), "" when unmapped
  uint64_t calls = 0;
  uint64_t total_ns = 0;
  uint64_t min_ns = 0;
  uint64_t max_ns = 0;
  double mean_ns() const { return calls ? static_cast<double>(total_ns) / calls : 0.0; }
};

// Per-kernel statistics, most GPU time first (ties: by name), each with its target
// (trace_targets.h, map_launch_to_target). A kernel whose launches ran in the ranges of operators
// of two targets is two rows, one per target.
std::vector<KernelStat> aggregate_kernels(const std::vector<KernelRecord>& kernels);

// Sum of every kernel's duration: the program's GPU time (kernels overlapping on several streams
// count fully each, as in torch.profiler's kernel totals).
uint64_t total_gpu_ns(const std::vector<KernelStat>& stats);

}  // namespace kiln::profile
