// The cuda backend's Device: one GPU, driven through the driver API in a context and stream of
// its own. Loads CUBINs, moves memory, launches and times kernels, and stops working for good
// once a sticky error (illegal address, trap, ...) has hit its context.
#pragma once

#ifdef KILN_HAVE_CUDA

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "evaluator/backend.h"
#include "evaluator/cuda/driver_api.h"
#include "evaluator/profile/cupti_metrics.h"
#include "shared/status.h"

namespace kiln::cuda {

// The NVRTC target for a compute capability: "sm_90a" for 9.0 (Hopper), "sm_100a" for 10.0
// (Blackwell B200), else "sm_<major><minor>".
std::string arch_for_compute_capability(int major, int minor);

// What the compiler made of one kernel (cuFuncGetAttribute).
struct KernelAttributes {
  int registers_per_thread = 0;
  int local_bytes_per_thread = 0;  // > 0 means spills or local arrays
  int static_shared_bytes = 0;
  int max_threads_per_block = 0;
};

// Not thread-safe: one thread drives a device at a time (it makes its context current on every
// call, so that thread may change). Every error is a Status naming the CUresult; after a sticky
// error every call returns kFailedPrecondition "device context is poisoned by an earlier error".
class CudaDevice final : public eval::Device {
 public:
  // Creates a context on GPU `ordinal`, one non-blocking stream and the timing events. `api` must
  // outlive the device.
  static Result<std::unique_ptr<CudaDevice>> open(const DriverApi& api, int ordinal);

  ~CudaDevice() override;
  CudaDevice(const CudaDevice&) = delete;
  CudaDevice& operator=(const CudaDevice&) = delete;

  std::string backend() const override { return "cuda"; }
  std::string name() const override { return name_; }
  std::string arch() const override { return arch_; }

  // cuModuleLoadData + cuModuleGetFunction; also reads the kernel's parameter sizes so that
  // launch() can reject arguments that do not match them. A triton binary (the triton backend's
  // compile output) loads its cubin's entry point, whatever `kernel_name` says, and its launches
  // get Triton's hidden parameters, its shared memory and a check of the block against its warps.
  Result<eval::KernelHandle> load(const std::string& binary,
                                  const std::string& kernel_name) override;
  Status unload(eval::KernelHandle kernel) override;

  // Memory operations are ordered after earlier launches and complete before they return.
  Result<void*> alloc(size_t bytes) override;
  Status free(void* ptr) override;
  Status copy_to_device(void* dst, const void* src, size_t bytes) override;
  Status copy_to_host(void* dst, const void* src, size_t bytes) override;
  Status copy_on_device(void* dst, const void* src, size_t bytes) override;
  Status fill(void* dst, unsigned char byte, size_t bytes) override;

  // Enqueues on the device's stream and checks the launch call itself; faults inside the kernel
  // surface at the next synchronizing call. More than 48 KB of dynamic shared memory is opted in
  // with CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES first.
  Status launch(eval::KernelHandle kernel, const eval::LaunchGeometry& geometry,
                const std::vector<eval::KernelArg>& args) override;
  Status synchronize() override;  // cuCtxSynchronize

  // [optional L2 flush] event, launch, event on the device's stream, then cuCtxSynchronize and
  // the elapsed time between the events in microseconds.
  Result<double> time_launch(eval::KernelHandle kernel, const eval::LaunchGeometry& geometry,
                             const std::vector<eval::KernelArg>& args, bool flush_l2) override;

  int sm_clock_mhz() override;  // through NVML; 0 when NVML is absent

  // cuTensorMapEncodeTiled: no interleave, 128-byte L2 promotion, zeros outside the tensor.
  Result<eval::KernelArg> tensor_map(const TensorMapArg& map, void* base) override;

  // Function attributes, theoretical occupancy, then the launch once more under the CUPTI Range
  // Profiler (kernel replay). CUPTI is loaded at the first call; when it is missing or counters
  // are not permitted the notice says so (once for good: later calls do not retry) and only the
  // attributes are returned.
  Result<LaunchProfile> profile_launch(eval::KernelHandle kernel,
                                       const eval::LaunchGeometry& geometry,
                                       const std::vector<eval::KernelArg>& args) override;

  Result<KernelAttributes> kernel_attributes(eval::KernelHandle kernel);
  int l2_cache_bytes() const { return l2_cache_bytes_; }
  const std::string& pci_bus_id() const { return pci_bus_id_; }
  // OK while the context is healthy, else the sticky error that poisoned it.
  const Status& poison() const { return poison_; }

 private:
  struct Kernel {
    std::string name;
    ModuleHandle module;
    CUfunction function = nullptr;
    std::vector<size_t> param_bytes;       // size of each declared parameter, in order
    // Dynamic shared memory the function currently accepts; 48 KB until opted in higher.
    uint32_t dynamic_shared_limit_bytes = 48 * 1024;
    // A Triton kernel (a triton binary, evaluator/triton/triton_binary.h): the trailing pointer
    // parameters Triton added (passed as null), the block its warps make (0: any) and the dynamic
    // shared memory every launch gives it at least.
    size_t hidden_args = 0;
    uint32_t threads = 0;
    uint32_t min_shared_bytes = 0;
    // A Triton kernel's variant compiled for arguments that are multiples of 16, and which
    // parameters those are: a launch whose every such argument is one runs it instead.
    std::unique_ptr<Kernel> divisible;
    std::vector<unsigned> divisible_args;
  };

  CudaDevice(const DriverApi& api, int ordinal);
  Status init();
  // Refuses work on a poisoned device, else makes the context current on this thread.
  Status enter();
  // The device's wrapper of DriverApi::check: remembers sticky errors in poison_.
  Status note(CUresult result, const char* call, const char* file, int line);
  Result<Kernel*> find(eval::KernelHandle kernel);
  // Loads `image` (a cubin, PTX or fatbin) as kernel.module and finds kernel.name and its
  // parameters in it.
  Status load_image(const std::string& image, Kernel& kernel);
  Status enqueue_launch(Kernel& kernel, const eval::LaunchGeometry& geometry,
                        const std::vector<eval::KernelArg>& args);

  const DriverApi& api_;
  const int ordinal_;
  CUdevice device_ = 0;
  std::string name_;
  std::string arch_;
  std::string pci_bus_id_;
  int l2_cache_bytes_ = 0;
  Status poison_;

  // The first handle, so the last destroyed: every object below lives in this context.
  ContextHandle context_;
  StreamHandle stream_;
  EventHandle start_;
  EventHandle stop_;
  DeviceMemory flush_buffer_;  // 2x L2, allocated at the first flushed timing
  size_t flush_bytes_ = 0;
  unsigned char flush_byte_ = 0;
  std::unordered_map<eval::KernelHandle, Kernel> kernels_;
  eval::KernelHandle next_kernel_ = 1;
  std::unordered_map<CUdeviceptr, DeviceMemory> allocations_;
  std::unique_ptr<profile::CuptiProfiler> cupti_;  // loaded at the first profile_launch
  std::string cupti_off_;  // why counters are off for this process ("" while they may work)
};

}  // namespace kiln::cuda

#endif  // KILN_HAVE_CUDA
