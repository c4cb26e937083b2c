// Hardware counters of one kernel launch through the CUPTI Range Profiler (CUDA 13) with kernel
// replay: libcupti is loaded at run time (never linked), so a machine without it still runs kiln
// and only goes without counters. Used in the process that owns the CUDA context (the sandbox
// child). The notice and error mapping below build without the CUDA toolkit.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "shared/status.h"

#ifdef KILN_HAVE_CUDA
#include <cuda.h>
#endif

namespace kiln::profile {

// CUptiResult codes kiln tells apart (cupti_result.h); the rest are reported by name.
inline constexpr int kCuptiSuccess = 0;
inline constexpr int kCuptiNotSupported = 27;
inline constexpr int kCuptiInsufficientPrivileges = 35;
inline constexpr int kCuptiVirtualizedInsufficientPrivileges = 40;
inline constexpr int kCuptiCmpDeviceNotSupported = 42;

// The one message for counters restricted to admin users (NVPA's ERR_NVGPUCTRPERM): what
// happened (`detail`: the call and its error), that kiln goes on without counters, and the fix.
std::string permission_notice(std::string_view detail);

// A CUPTI error as a Status: kFailedPrecondition carrying permission_notice() for the privilege
// errors (and for any error text that speaks of privileges), kUnimplemented for a device or
// configuration that cannot be profiled, kInternal otherwise. `call` names the CUPTI function,
// `text` is CUPTI's name and description of `result`.
Status cupti_status(int result, std::string_view call, std::string_view text);

// Whether `s` is the permission failure cupti_status() makes (the profiler stops trying).
bool is_permission_denied(const Status& s);

// Where libcupti is looked for, in order: the loader's search path (LD_LIBRARY_PATH, system),
// $CUDA_HOME and $CUDA_PATH (lib64, extras/CUPTI/lib64), /usr/local/cuda.
std::vector<std::string> default_cupti_paths();

#ifdef KILN_HAVE_CUDA

// One launch's counters.
struct CounterReading {
  std::map<std::string, double> values;  // by CUPTI metric name
  std::vector<std::string> unsupported;  // asked for, but the chip does not have them
  size_t passes = 0;                     // replays the metrics needed
};

// Not thread-safe; one per process (CUPTI's profiler state is process-wide). The CUDA context
// passed to measure() must be current on the calling thread.
class CuptiProfiler {
 public:
  // dlopens libcupti (from `paths`, the first that loads; libnvperf_host.so from the same folder
  // first, which libcupti loads by name) and resolves every entry point. kUnavailable, with the
  // paths tried, when there is none or it lacks entry points (older than CUDA 13).
  static Result<std::unique_ptr<CuptiProfiler>> load(
      const std::vector<std::string>& paths = default_cupti_paths());
  ~CuptiProfiler();
  CuptiProfiler(const CuptiProfiler&) = delete;
  CuptiProfiler& operator=(const CuptiProfiler&) = delete;

  // Runs `launch` (which enqueues ONE kernel on `context` and waits for it) inside a Range
  // Profiler session in auto-range, kernel-replay mode: CUPTI replays the kernel as many times as
  // the metrics need, saving and restoring the device memory it writes in between. Metrics the
  // chip does not support are left out (queried once per process, at the first call). Errors are
  // cupti_status()'s; a failure of `launch` itself is returned as it is.
  Result<CounterReading> measure(CUcontext context, int device_ordinal,
                                 const std::vector<std::string>& metrics,
                                 const std::function<Status()>& launch);

  const std::string& path() const { return path_; }

  struct Api;

 private:
  CuptiProfiler();
  Status initialize();
  Status call(int result, const char* name) const;
  Result<std::vector<std::string>> supported(const std::string& chip,
                                             const std::vector<uint8_t>& availability,
                                             const std::vector<std::string>& wanted);

  std::unique_ptr<Api> api_;
  std::string path_;
  bool initialized_ = false;
  std::vector<std::string> base_metrics_;  // the chip's, sorted; empty until first queried
};

#endif  // KILN_HAVE_CUDA

}  // namespace kiln::profile
