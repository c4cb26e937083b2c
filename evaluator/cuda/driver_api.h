// The CUDA driver API as a table of function pointers resolved from libcuda.so.1 at run time (never
// linked), the one helper that turns a CUresult into a Status, and RAII handles for driver objects.
#pragma once

#ifdef KILN_HAVE_CUDA

#include <cuda.h>

#include <memory>
#include <string>
#include <utility>

#include "shared/status.h"

namespace kiln::cuda {

// Every driver entry point kiln calls. cuda.h #defines many names to versioned symbols
// (cuMemAlloc -> cuMemAlloc_v2, cuCtxCreate -> cuCtxCreate_v4 in CUDA 13, whose signature takes a
// CUctxCreateParams*); X(name) sees the name after that expansion, so the field's type comes from
// the header's own declaration and dlsym looks up the symbol the header means.
// clang-format off
#define KILN_CUDA_DRIVER_FUNCTIONS(X)                                                            \
  X(cuInit) X(cuDriverGetVersion) X(cuGetErrorName) X(cuGetErrorString) X(cuDeviceGet)           \
  X(cuDeviceGetCount) X(cuDeviceGetAttribute) X(cuDeviceGetName) X(cuDeviceGetPCIBusId)         \
  X(cuCtxCreate) X(cuCtxDestroy) X(cuCtxSetCurrent) X(cuCtxGetDevice) X(cuCtxSynchronize)        \
  X(cuModuleLoadData) X(cuModuleGetFunction) X(cuModuleUnload) X(cuFuncSetAttribute)             \
  X(cuFuncGetAttribute) X(cuFuncGetParamInfo) X(cuLaunchKernel) X(cuMemAlloc) X(cuMemFree)      \
  X(cuMemcpyHtoD) X(cuMemcpyDtoH) X(cuMemcpyHtoDAsync) X(cuMemcpyDtoHAsync)                      \
  X(cuMemcpyDtoDAsync) X(cuMemsetD8) X(cuMemsetD8Async) X(cuStreamCreate) X(cuStreamDestroy)     \
  X(cuStreamSynchronize)                                                                         \
  X(cuEventCreate) X(cuEventRecord) X(cuEventSynchronize) X(cuEventElapsedTime)                  \
  X(cuEventDestroy) X(cuOccupancyMaxActiveBlocksPerMultiprocessor)                              \
  X(cuTensorMapEncodeTiled)
// clang-format on

#define KILN_CUDA_DECLARE_FIELD(fn) decltype(&::fn) fn = nullptr;

// The loaded driver. Created once by the process that owns the GPU (the sandbox child) and passed
// down by reference; it must outlive every CudaDevice and handle made with it. Not copyable: the
// handles point at it. Thread-safe (the driver API is; the NVML part only reads).
class DriverApi {
 public:
  // dlopens libcuda.so.1, resolves every entry point and calls cuInit(0). kUnavailable when there
  // is no driver or no usable GPU. Also tries NVML (libnvidia-ml.so.1) for clock readings; its
  // absence is not an error.
  static Result<std::unique_ptr<DriverApi>> load();

  ~DriverApi();
  DriverApi(const DriverApi&) = delete;
  DriverApi& operator=(const DriverApi&) = delete;

  // The one checking helper: OK for CUDA_SUCCESS, else a Status naming the call, the CUresult's
  // name and description, and file:line. CUDA_ERROR_OUT_OF_MEMORY is kResourceExhausted; every
  // other error (sticky ones included) is kInternal. Use it through KILN_CU.
  Status check(CUresult result, const char* call, const char* file, int line) const;

  // "CUDA_ERROR_ILLEGAL_ADDRESS" (or "CUresult 12345" for a code the driver does not know).
  std::string error_name(CUresult result) const;

  // True for errors that leave the context unusable: every later call in the process returns the
  // same error and only a new process recovers (illegal address, launch failure, trap, ...).
  static bool is_sticky(CUresult result);

  int driver_version() const { return driver_version_; }  // e.g. 13000

  // Current SM clock of the GPU at `pci_bus_id` (as cuDeviceGetPCIBusId writes it) in MHz, or 0
  // when NVML is absent or cannot tell.
  int sm_clock_mhz(const std::string& pci_bus_id) const;

  // The function table; call through KILN_CU rather than directly.
  KILN_CUDA_DRIVER_FUNCTIONS(KILN_CUDA_DECLARE_FIELD)

 private:
  struct Nvml;
  DriverApi();

  void* library_ = nullptr;  // never dlclosed: the driver is process-wide state
  int driver_version_ = 0;
  std::unique_ptr<Nvml> nvml_;  // null when libnvidia-ml is absent
};

#undef KILN_CUDA_DECLARE_FIELD

// Calls `fn` from the DriverApi `api` and checks its result: a Status (OK or the error). `fn` is
// written as in the CUDA docs (cuMemAlloc); the message names it so, the call uses the symbol.
#define KILN_CU(api, fn, ...) (api).check((api).fn(__VA_ARGS__), #fn, __FILE__, __LINE__)

// A move-only owner of one driver object, destroyed through the table's `Destroy` entry point
// (e.g. &DriverApi::cuModuleUnload, named `kName` in errors). Errors on destruction are ignored:
// after a sticky error they are expected and nothing is left to do. The object's context must
// still exist when the handle dies.
template <typename T, auto Destroy, const char* kName>
class DriverHandle {
 public:
  DriverHandle() = default;
  DriverHandle(const DriverApi& api, T value) : api_(&api), value_(value) {}
  ~DriverHandle() { reset().ignore(); }
  DriverHandle(DriverHandle&& other) noexcept
      : api_(other.api_), value_(std::exchange(other.value_, T{})) {}
  DriverHandle& operator=(DriverHandle&& other) noexcept {
    if (this != &other) {
      reset().ignore();
      api_ = other.api_;
      value_ = std::exchange(other.value_, T{});
    }
    return *this;
  }
  DriverHandle(const DriverHandle&) = delete;
  DriverHandle& operator=(const DriverHandle&) = delete;

  T get() const { return value_; }
  explicit operator bool() const { return value_ != T{}; }

  // Gives up ownership without destroying (for callers that destroy through their own check).
  T release() { return std::exchange(value_, T{}); }

  // Destroys the object now and reports the driver's answer; the handle is empty afterwards.
  Status reset() {
    if (value_ == T{}) return Status::ok();
    T value = std::exchange(value_, T{});
    return api_->check((api_->*Destroy)(value), kName, __FILE__, __LINE__);
  }

 private:
  const DriverApi* api_ = nullptr;
  T value_{};
};

inline constexpr char kCuCtxDestroyName[] = "cuCtxDestroy";
inline constexpr char kCuModuleUnloadName[] = "cuModuleUnload";
inline constexpr char kCuStreamDestroyName[] = "cuStreamDestroy";
inline constexpr char kCuEventDestroyName[] = "cuEventDestroy";
inline constexpr char kCuMemFreeName[] = "cuMemFree";

using ContextHandle = DriverHandle<CUcontext, &DriverApi::cuCtxDestroy, kCuCtxDestroyName>;
using ModuleHandle = DriverHandle<CUmodule, &DriverApi::cuModuleUnload, kCuModuleUnloadName>;
using StreamHandle = DriverHandle<CUstream, &DriverApi::cuStreamDestroy, kCuStreamDestroyName>;
using EventHandle = DriverHandle<CUevent, &DriverApi::cuEventDestroy, kCuEventDestroyName>;
using DeviceMemory = DriverHandle<CUdeviceptr, &DriverApi::cuMemFree, kCuMemFreeName>;

}  // namespace kiln::cuda

#endif  // KILN_HAVE_CUDA
