// The CUPTI loader (dlopen/dlsym, like evaluator/cuda/driver_api.cc does for libcuda) and one
// Range Profiler session per measure(): host object for the chip -> config image of the metrics
// -> range profiler enabled on the context -> counter data image -> auto range, kernel replay ->
// launch -> decode -> evaluate the metrics of range 0 -> disable. Every object is released on
// every path (the guards below), so a failed session leaves the context usable for timing.
#include "evaluator/profile/cupti_metrics.h"

#include <dlfcn.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>

#ifdef KILN_HAVE_CUDA
#include <cupti_profiler_host.h>
#include <cupti_profiler_target.h>
#include <cupti_range_profiler.h>
#include <cupti_result.h>
#include <cupti_target.h>
#endif

namespace kiln::profile {

std::string permission_notice(std::string_view detail) {
  return "CUPTI hardware counters are restricted to admin users on this machine "
         "(ERR_NVGPUCTRPERM: " +
         std::string(detail) +
         "). kiln goes on without counter metrics "
         "(registers, shared memory, spills and theoretical occupancy are still reported). To "
         "enable them: run kiln as root, or allow every user and reload the driver: "
         "`echo 'options nvidia NVreg_RestrictProfilingToAdminUsers=0' | sudo tee "
         "/etc/modprobe.d/nvidia-profiling.conf`, then reload the nvidia kernel module (or "
         "reboot); in a container the host must set it (or the container needs CAP_SYS_ADMIN).";
}

Status cupti_status(int result, std::string_view call, std::string_view text) {
  std::string what = std::string(call) + " returned " + std::string(text);
  std::string lower(text);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (result == kCuptiInsufficientPrivileges || result == kCuptiVirtualizedInsufficientPrivileges ||
      lower.find("privil") != std::string::npos) {
    return failed_precondition(permission_notice(what));
  }
  if (result == kCuptiNotSupported || result == kCuptiCmpDeviceNotSupported) {
    return unimplemented("CUPTI cannot profile this device or configuration: " + what);
  }
  return internal_error("CUPTI: " + what);
}

bool is_permission_denied(const Status& s) {
  return s.code() == StatusCode::kFailedPrecondition &&
         s.message().find("ERR_NVGPUCTRPERM") != std::string::npos;
}

std::vector<std::string> default_cupti_paths() {
  std::vector<std::string> paths = {"libcupti.so.13", "libcupti.so"};
  for (const char* env : {"CUDA_HOME", "CUDA_PATH"}) {
    if (const char* home = std::getenv(env); home != nullptr && *home != '\0') {
      paths.push_back(std::string(home) + "/lib64/libcupti.so.13");
      paths.push_back(std::string(home) + "/extras/CUPTI/lib64/libcupti.so.13");
    }
  }
  paths.push_back("/usr/local/cuda/lib64/libcupti.so.13");
  paths.push_back("/usr/local/cuda/extras/CUPTI/lib64/libcupti.so.13");
  return paths;
}

#ifdef KILN_HAVE_CUDA

#define KILN_CUPTI_FUNCTIONS(X)                                                           \
  X(cuptiGetResultString)                                                                 \
  X(cuptiProfilerInitialize) X(cuptiProfilerDeInitialize) X(cuptiDeviceGetChipName)       \
      X(cuptiProfilerGetCounterAvailability) X(cuptiProfilerHostInitialize)               \
          X(cuptiProfilerHostDeinitialize) X(cuptiProfilerHostGetBaseMetrics)             \
              X(cuptiProfilerHostConfigAddMetrics) X(cuptiProfilerHostGetConfigImageSize) \
                  X(cuptiProfilerHostGetConfigImage) X(cuptiProfilerHostGetNumOfPasses)   \
                      X(cuptiProfilerHostEvaluateToGpuValues) X(cuptiRangeProfilerEnable) \
                          X(cuptiRangeProfilerDisable) X(cuptiRangeProfilerSetConfig)     \
                              X(cuptiRangeProfilerStart) X(cuptiRangeProfilerStop)        \
                                  X(cuptiRangeProfilerDecodeData)                         \
                                      X(cuptiRangeProfilerGetCounterDataSize)             \
                                          X(cuptiRangeProfilerCounterDataImageInitialize) \
                                              X(cuptiRangeProfilerGetCounterDataInfo)

#define KILN_CUPTI_FIELD(fn) decltype(&::fn) fn = nullptr;

struct CuptiProfiler::Api {
  void* library = nullptr;  // never dlclosed: CUPTI keeps process-wide state and threads
  KILN_CUPTI_FUNCTIONS(KILN_CUPTI_FIELD)
};

#undef KILN_CUPTI_FIELD

namespace {

// Zero-initialized CUPTI parameter struct with its size set, as every CUPTI call wants it.
template <typename P>
P params(size_t struct_size) {
  P p{};
  p.structSize = struct_size;
  return p;
}

std::string base_name(const std::string& metric) { return metric.substr(0, metric.find('.')); }

}  // namespace

CuptiProfiler::CuptiProfiler() : api_(std::make_unique<Api>()) {}

CuptiProfiler::~CuptiProfiler() {
  if (initialized_) {
    auto p =
        params<CUpti_Profiler_DeInitialize_Params>(CUpti_Profiler_DeInitialize_Params_STRUCT_SIZE);
    api_->cuptiProfilerDeInitialize(&p);
  }
}

Result<std::unique_ptr<CuptiProfiler>> CuptiProfiler::load(const std::vector<std::string>& paths) {
  std::string tried;
  for (const std::string& path : paths) {
    // libcupti dlopens libnvperf_host.so by name; loaded first from the same folder, the loader
    // finds it by its soname even when that folder is not on the search path.
    const std::filesystem::path folder = std::filesystem::path(path).parent_path();
    if (!folder.empty()) {
      dlopen((folder / "libnvperf_host.so").c_str(), RTLD_NOW | RTLD_GLOBAL);
    }
    void* library = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (library == nullptr) {
      tried += (tried.empty() ? "" : ", ") + path;
      continue;
    }
    std::unique_ptr<CuptiProfiler> profiler(new CuptiProfiler());
    profiler->api_->library = library;
    profiler->path_ = path;
    std::string missing;
#define KILN_CUPTI_RESOLVE(fn)                                                              \
  profiler->api_->fn = reinterpret_cast<decltype(profiler->api_->fn)>(dlsym(library, #fn)); \
  if (profiler->api_->fn == nullptr) missing += (missing.empty() ? "" : ", ") + std::string(#fn);
    KILN_CUPTI_FUNCTIONS(KILN_CUPTI_RESOLVE)
#undef KILN_CUPTI_RESOLVE
    if (!missing.empty()) {
      return unavailable(path + " lacks the CUDA 13 Range Profiler entry points (" + missing +
                         "); kiln goes on without counter metrics");
    }
    return profiler;
  }
  return unavailable("CUPTI not found (tried " + tried +
                     "); kiln goes on without counter metrics. Install the CUDA toolkit's CUPTI "
                     "or point CUDA_HOME or LD_LIBRARY_PATH at it");
}

Status CuptiProfiler::call(int result, const char* name) const {
  if (result == CUPTI_SUCCESS) return Status::ok();
  const char* text = nullptr;
  if (api_->cuptiGetResultString(static_cast<CUptiResult>(result), &text) != CUPTI_SUCCESS ||
      text == nullptr) {
    text = "unknown CUPTI result";
  }
  return cupti_status(result, name, std::string(text) + " (" + std::to_string(result) + ")");
}

#define KILN_CUPTI(fn, p) call(api_->fn(&(p)), #fn)

Status CuptiProfiler::initialize() {
  if (initialized_) return Status::ok();
  auto p = params<CUpti_Profiler_Initialize_Params>(CUpti_Profiler_Initialize_Params_STRUCT_SIZE);
  KILN_RETURN_IF_ERROR(KILN_CUPTI(cuptiProfilerInitialize, p));
  initialized_ = true;
  return Status::ok();
}

namespace {

// Deinitializes a host object on scope exit.
struct HostGuard {
  const CuptiProfiler::Api& api;
  CUpti_Profiler_Host_Object* object = nullptr;
  ~HostGuard() {
    if (object == nullptr) return;
    auto p = params<CUpti_Profiler_Host_Deinitialize_Params>(
        CUpti_Profiler_Host_Deinitialize_Params_STRUCT_SIZE);
    p.pHostObject = object;
    api.cuptiProfilerHostDeinitialize(&p);
  }
};

// Disables the range profiler on a context on scope exit.
struct RangeGuard {
  const CuptiProfiler::Api& api;
  CUpti_RangeProfiler_Object* object = nullptr;
  ~RangeGuard() {
    if (object == nullptr) return;
    auto p =
        params<CUpti_RangeProfiler_Disable_Params>(CUpti_RangeProfiler_Disable_Params_STRUCT_SIZE);
    p.pRangeProfilerObject = object;
    api.cuptiRangeProfilerDisable(&p);
  }
};

}  // namespace

Result<std::vector<std::string>> CuptiProfiler::supported(const std::string& chip,
                                                          const std::vector<uint8_t>& availability,
                                                          const std::vector<std::string>& wanted) {
  if (base_metrics_.empty()) {
    auto init = params<CUpti_Profiler_Host_Initialize_Params>(
        CUpti_Profiler_Host_Initialize_Params_STRUCT_SIZE);
    init.profilerType = CUPTI_PROFILER_TYPE_RANGE_PROFILER;
    init.pChipName = chip.c_str();
    init.pCounterAvailabilityImage = availability.data();
    KILN_RETURN_IF_ERROR(KILN_CUPTI(cuptiProfilerHostInitialize, init));
    HostGuard host{*api_, init.pHostObject};
    for (CUpti_MetricType type :
         {CUPTI_METRIC_TYPE_COUNTER, CUPTI_METRIC_TYPE_RATIO, CUPTI_METRIC_TYPE_THROUGHPUT}) {
      auto list = params<CUpti_Profiler_Host_GetBaseMetrics_Params>(
          CUpti_Profiler_Host_GetBaseMetrics_Params_STRUCT_SIZE);
      list.pHostObject = host.object;
      list.metricType = type;
      KILN_RETURN_IF_ERROR(KILN_CUPTI(cuptiProfilerHostGetBaseMetrics, list));
      for (size_t i = 0; i < list.numMetrics && list.ppMetricNames != nullptr; ++i) {
        if (list.ppMetricNames[i] != nullptr) base_metrics_.emplace_back(list.ppMetricNames[i]);
      }
    }
    std::sort(base_metrics_.begin(), base_metrics_.end());
    if (base_metrics_.empty()) return internal_error("CUPTI lists no metrics for chip " + chip);
  }
  std::vector<std::string> out;
  for (const std::string& m : wanted) {
    if (std::binary_search(base_metrics_.begin(), base_metrics_.end(), base_name(m))) {
      out.push_back(m);
    }
  }
  return out;
}

Result<CounterReading> CuptiProfiler::measure(CUcontext context, int device_ordinal,
                                              const std::vector<std::string>& metrics,
                                              const std::function<Status()>& launch) {
  KILN_RETURN_IF_ERROR(initialize());
  auto chip_params =
      params<CUpti_Device_GetChipName_Params>(CUpti_Device_GetChipName_Params_STRUCT_SIZE);
  chip_params.deviceIndex = static_cast<size_t>(device_ordinal);
  KILN_RETURN_IF_ERROR(KILN_CUPTI(cuptiDeviceGetChipName, chip_params));
  if (chip_params.pChipName == nullptr) return internal_error("CUPTI gave no chip name");
  const std::string chip = chip_params.pChipName;

  // Which counters this context may read (the first call that fails without the privilege).
  auto avail = params<CUpti_Profiler_GetCounterAvailability_Params>(
      CUpti_Profiler_GetCounterAvailability_Params_STRUCT_SIZE);
  avail.ctx = context;
  KILN_RETURN_IF_ERROR(KILN_CUPTI(cuptiProfilerGetCounterAvailability, avail));
  std::vector<uint8_t> availability(avail.counterAvailabilityImageSize);
  avail.pCounterAvailabilityImage = availability.data();
  KILN_RETURN_IF_ERROR(KILN_CUPTI(cuptiProfilerGetCounterAvailability, avail));

  CounterReading reading;
  KILN_ASSIGN_OR_RETURN(std::vector<std::string> names, supported(chip, availability, metrics));
  for (const std::string& m : metrics) {
    if (std::find(names.begin(), names.end(), m) == names.end()) reading.unsupported.push_back(m);
  }
  if (names.empty()) return reading;
  std::vector<const char*> name_ptrs;
  for (const std::string& n : names) name_ptrs.push_back(n.c_str());

  // The config image: which counters to collect in which pass.
  auto init = params<CUpti_Profiler_Host_Initialize_Params>(
      CUpti_Profiler_Host_Initialize_Params_STRUCT_SIZE);
  init.profilerType = CUPTI_PROFILER_TYPE_RANGE_PROFILER;
  init.pChipName = chip.c_str();
  init.pCounterAvailabilityImage = availability.data();
  KILN_RETURN_IF_ERROR(KILN_CUPTI(cuptiProfilerHostInitialize, init));
  HostGuard host{*api_, init.pHostObject};
  auto add = params<CUpti_Profiler_Host_ConfigAddMetrics_Params>(
      CUpti_Profiler_Host_ConfigAddMetrics_Params_STRUCT_SIZE);
  add.pHostObject = host.object;
  add.ppMetricNames = name_ptrs.data();
  add.numMetrics = name_ptrs.size();
  KILN_RETURN_IF_ERROR(KILN_CUPTI(cuptiProfilerHostConfigAddMetrics, add));
  auto size = params<CUpti_Profiler_Host_GetConfigImageSize_Params>(
      CUpti_Profiler_Host_GetConfigImageSize_Params_STRUCT_SIZE);
  size.pHostObject = host.object;
  KILN_RETURN_IF_ERROR(KILN_CUPTI(cuptiProfilerHostGetConfigImageSize, size));
  std::vector<uint8_t> config(size.configImageSize);
  auto image = params<CUpti_Profiler_Host_GetConfigImage_Params>(
      CUpti_Profiler_Host_GetConfigImage_Params_STRUCT_SIZE);
  image.pHostObject = host.object;
  image.configImageSize = config.size();
  image.pConfigImage = config.data();
  KILN_RETURN_IF_ERROR(KILN_CUPTI(cuptiProfilerHostGetConfigImage, image));
  auto passes = params<CUpti_Profiler_Host_GetNumOfPasses_Params>(
      CUpti_Profiler_Host_GetNumOfPasses_Params_STRUCT_SIZE);
  passes.configImageSize = config.size();
  passes.pConfigImage = config.data();
  KILN_RETURN_IF_ERROR(KILN_CUPTI(cuptiProfilerHostGetNumOfPasses, passes));
  reading.passes = passes.numOfPasses;

  // The session on the context: one range (the one launch), replayed per pass by CUPTI.
  auto enable =
      params<CUpti_RangeProfiler_Enable_Params>(CUpti_RangeProfiler_Enable_Params_STRUCT_SIZE);
  enable.ctx = context;
  KILN_RETURN_IF_ERROR(KILN_CUPTI(cuptiRangeProfilerEnable, enable));
  RangeGuard range{*api_, enable.pRangeProfilerObject};
  auto data_size = params<CUpti_RangeProfiler_GetCounterDataSize_Params>(
      CUpti_RangeProfiler_GetCounterDataSize_Params_STRUCT_SIZE);
  data_size.pRangeProfilerObject = range.object;
  data_size.pMetricNames = name_ptrs.data();
  data_size.numMetrics = name_ptrs.size();
  data_size.maxNumOfRanges = 1;
  data_size.maxNumRangeTreeNodes = 1;
  KILN_RETURN_IF_ERROR(KILN_CUPTI(cuptiRangeProfilerGetCounterDataSize, data_size));
  std::vector<uint8_t> counter_data(data_size.counterDataSize);
  auto data_init = params<CUpti_RangeProfiler_CounterDataImage_Initialize_Params>(
      CUpti_RangeProfiler_CounterDataImage_Initialize_Params_STRUCT_SIZE);
  data_init.pRangeProfilerObject = range.object;
  data_init.counterDataSize = counter_data.size();
  data_init.pCounterData = counter_data.data();
  KILN_RETURN_IF_ERROR(KILN_CUPTI(cuptiRangeProfilerCounterDataImageInitialize, data_init));
  auto set = params<CUpti_RangeProfiler_SetConfig_Params>(
      CUpti_RangeProfiler_SetConfig_Params_STRUCT_SIZE);
  set.pRangeProfilerObject = range.object;
  set.configSize = config.size();
  set.pConfig = config.data();
  set.counterDataImageSize = counter_data.size();
  set.pCounterDataImage = counter_data.data();
  // Kernel replay works with auto ranges only (one range per launch); a user range with kernel
  // replay is refused by CUPTI.
  set.range = CUPTI_AutoRange;
  set.replayMode = CUPTI_KernelReplay;
  set.maxRangesPerPass = 1;
  set.numNestingLevels = 1;
  set.minNestingLevel = 1;
  set.passIndex = 0;
  set.targetNestingLevel = 1;
  KILN_RETURN_IF_ERROR(KILN_CUPTI(cuptiRangeProfilerSetConfig, set));
  auto start =
      params<CUpti_RangeProfiler_Start_Params>(CUpti_RangeProfiler_Start_Params_STRUCT_SIZE);
  start.pRangeProfilerObject = range.object;
  KILN_RETURN_IF_ERROR(KILN_CUPTI(cuptiRangeProfilerStart, start));
  Status launched = launch();
  auto stop = params<CUpti_RangeProfiler_Stop_Params>(CUpti_RangeProfiler_Stop_Params_STRUCT_SIZE);
  stop.pRangeProfilerObject = range.object;
  Status stopped = KILN_CUPTI(cuptiRangeProfilerStop, stop);
  KILN_RETURN_IF_ERROR(launched);
  KILN_RETURN_IF_ERROR(stopped);
  auto decode = params<CUpti_RangeProfiler_DecodeData_Params>(
      CUpti_RangeProfiler_DecodeData_Params_STRUCT_SIZE);
  decode.pRangeProfilerObject = range.object;
  KILN_RETURN_IF_ERROR(KILN_CUPTI(cuptiRangeProfilerDecodeData, decode));

  auto info = params<CUpti_RangeProfiler_GetCounterDataInfo_Params>(
      CUpti_RangeProfiler_GetCounterDataInfo_Params_STRUCT_SIZE);
  info.pCounterDataImage = counter_data.data();
  info.counterDataImageSize = counter_data.size();
  KILN_RETURN_IF_ERROR(KILN_CUPTI(cuptiRangeProfilerGetCounterDataInfo, info));
  if (info.numTotalRanges == 0) {
    return internal_error("CUPTI recorded no range for the launch (" +
                          std::to_string(decode.numOfRangeDropped) + " dropped)");
  }
  std::vector<double> values(name_ptrs.size(), 0.0);
  auto eval = params<CUpti_Profiler_Host_EvaluateToGpuValues_Params>(
      CUpti_Profiler_Host_EvaluateToGpuValues_Params_STRUCT_SIZE);
  eval.pHostObject = host.object;
  eval.pCounterDataImage = counter_data.data();
  eval.counterDataImageSize = counter_data.size();
  eval.rangeIndex = 0;
  eval.ppMetricNames = name_ptrs.data();
  eval.numMetrics = name_ptrs.size();
  eval.pMetricValues = values.data();
  KILN_RETURN_IF_ERROR(KILN_CUPTI(cuptiProfilerHostEvaluateToGpuValues, eval));
  for (size_t i = 0; i < names.size(); ++i) reading.values[names[i]] = values[i];
  return reading;
}

#undef KILN_CUPTI

#endif  // KILN_HAVE_CUDA

}  // namespace kiln::profile
