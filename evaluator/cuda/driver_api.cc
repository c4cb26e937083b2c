// Loading the CUDA driver API (and, optionally, NVML for clock readings) with dlopen/dlsym, and the
// conversion of CUresult codes into Status.
#include "evaluator/cuda/driver_api.h"

#ifdef KILN_HAVE_CUDA

#include <dlfcn.h>

#include <cstring>

namespace kiln::cuda {

// NVML is optional and its header is not part of the toolkit, so the four entry points used are
// declared here from the documented C ABI (nvml.h): nvmlReturn_t is an int enum, 0 = success.
// Outside the anonymous namespace: DriverApi::Nvml, a member of a named class, holds them.
struct NvmlDeviceOpaque;
using NvmlDevice = NvmlDeviceOpaque*;
using NvmlInitFn = int (*)();
using NvmlShutdownFn = int (*)();
using NvmlHandleByPciFn = int (*)(const char*, NvmlDevice*);
using NvmlClockInfoFn = int (*)(NvmlDevice, int, unsigned*);

namespace {

#define KILN_CUDA_STR_INNER(x) #x
#define KILN_CUDA_STR(x) KILN_CUDA_STR_INNER(x)

constexpr int kNvmlSuccess = 0;
constexpr int kNvmlClockSm = 1;  // NVML_CLOCK_SM in nvmlClockType_t

template <typename Fn>
void resolve(void* library, const char* symbol, Fn* out, std::string* missing) {
  *out = reinterpret_cast<Fn>(dlsym(library, symbol));
  if (*out == nullptr) *missing += (missing->empty() ? "" : ", ") + std::string(symbol);
}

const char* file_basename(const char* path) {
  const char* slash = std::strrchr(path, '/');
  return slash ? slash + 1 : path;
}

}  // namespace

struct DriverApi::Nvml {
  NvmlShutdownFn shutdown = nullptr;
  NvmlHandleByPciFn handle_by_pci = nullptr;
  NvmlClockInfoFn clock_info = nullptr;
  bool initialized = false;
  // NVML counts init/shutdown pairs; the library itself stays loaded, like libcuda.
  ~Nvml() {
    if (initialized) shutdown();
  }
};

DriverApi::DriverApi() = default;
DriverApi::~DriverApi() = default;

Result<std::unique_ptr<DriverApi>> DriverApi::load() {
  void* library = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    const char* error = dlerror();
    return unavailable(std::string("cannot load libcuda.so.1 (no NVIDIA driver)") +
                       (error ? std::string(": ") + error : ""));
  }
  std::unique_ptr<DriverApi> api(new DriverApi());
  api->library_ = library;
  std::string missing;
#define KILN_CUDA_RESOLVE(fn) resolve(library, KILN_CUDA_STR(fn), &api->fn, &missing);
  KILN_CUDA_DRIVER_FUNCTIONS(KILN_CUDA_RESOLVE)
#undef KILN_CUDA_RESOLVE
  if (!missing.empty()) {
    return unavailable("libcuda.so.1 lacks driver entry points (driver older than CUDA " +
                       std::to_string(CUDA_VERSION / 1000) + "?): " + missing);
  }
  if (Status s = KILN_CU(*api, cuInit, 0); !s.is_ok()) {
    return unavailable("no usable CUDA GPU: " + s.message());
  }
  KILN_RETURN_IF_ERROR(KILN_CU(*api, cuDriverGetVersion, &api->driver_version_));

  // NVML: only for sm_clock_mhz. Any failure leaves nvml_ null and clocks read as 0.
  if (void* nvml = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL)) {
    NvmlInitFn init = nullptr;
    auto table = std::make_unique<Nvml>();
    std::string nvml_missing;
    resolve(nvml, "nvmlInit_v2", &init, &nvml_missing);
    resolve(nvml, "nvmlShutdown", &table->shutdown, &nvml_missing);
    resolve(nvml, "nvmlDeviceGetHandleByPciBusId_v2", &table->handle_by_pci, &nvml_missing);
    resolve(nvml, "nvmlDeviceGetClockInfo", &table->clock_info, &nvml_missing);
    table->initialized = nvml_missing.empty() && init() == kNvmlSuccess;
    if (table->initialized) api->nvml_ = std::move(table);
  }
  return api;
}

std::string DriverApi::error_name(CUresult result) const {
  const char* name = nullptr;
  if (cuGetErrorName != nullptr && cuGetErrorName(result, &name) == CUDA_SUCCESS && name) {
    return name;
  }
  return "CUresult " + std::to_string(static_cast<int>(result));
}

Status DriverApi::check(CUresult result, const char* call, const char* file, int line) const {
  if (result == CUDA_SUCCESS) return Status::ok();
  const char* description = nullptr;
  if (cuGetErrorString == nullptr || cuGetErrorString(result, &description) != CUDA_SUCCESS ||
      description == nullptr) {
    description = "no description";
  }
  std::string message = std::string(call) + " failed: " + error_name(result) + " (" +
                        description + ") at " + file_basename(file) + ":" + std::to_string(line);
  StatusCode code = result == CUDA_ERROR_OUT_OF_MEMORY ? StatusCode::kResourceExhausted
                                                       : StatusCode::kInternal;
  return Status(code, std::move(message));
}

bool DriverApi::is_sticky(CUresult result) {
  // From cuda.h: the errors documented as leaving the process in an inconsistent state ("any
  // further CUDA work will return the same error"), plus UNKNOWN, which we cannot trust.
  switch (result) {
    case CUDA_ERROR_ECC_UNCORRECTABLE:
    case CUDA_ERROR_CONTAINED:
    case CUDA_ERROR_ILLEGAL_ADDRESS:
    case CUDA_ERROR_LAUNCH_TIMEOUT:
    case CUDA_ERROR_CONTEXT_IS_DESTROYED:
    case CUDA_ERROR_ASSERT:
    case CUDA_ERROR_HARDWARE_STACK_ERROR:
    case CUDA_ERROR_ILLEGAL_INSTRUCTION:
    case CUDA_ERROR_MISALIGNED_ADDRESS:
    case CUDA_ERROR_INVALID_ADDRESS_SPACE:
    case CUDA_ERROR_INVALID_PC:
    case CUDA_ERROR_LAUNCH_FAILED:
    case CUDA_ERROR_TENSOR_MEMORY_LEAK:
    case CUDA_ERROR_MPS_CLIENT_TERMINATED:
    case CUDA_ERROR_EXTERNAL_DEVICE:
    case CUDA_ERROR_UNKNOWN:
      return true;
    default:
      return false;
  }
}

int DriverApi::sm_clock_mhz(const std::string& pci_bus_id) const {
  if (nvml_ == nullptr) return 0;
  NvmlDevice device = nullptr;
  if (nvml_->handle_by_pci(pci_bus_id.c_str(), &device) != kNvmlSuccess) return 0;
  unsigned mhz = 0;
  if (nvml_->clock_info(device, kNvmlClockSm, &mhz) != kNvmlSuccess) return 0;
  return static_cast<int>(mhz);
}

}  // namespace kiln::cuda

#endif  // KILN_HAVE_CUDA
