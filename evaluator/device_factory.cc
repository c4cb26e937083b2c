// open_device: backend name -> Device, and the adapter that keeps the CUDA driver table alive for
// as long as the CudaDevice made with it.
#include "evaluator/device_factory.h"

#include <utility>

#include "evaluator/cpu/cpu_device.h"
#include "shared/backends.h"
#ifdef KILN_HAVE_CUDA
#include "evaluator/cuda/cuda_device.h"
#include "evaluator/cuda/driver_api.h"
#endif

namespace kiln::eval {
namespace {

#ifdef KILN_HAVE_CUDA
// CudaDevice borrows its DriverApi; this owner holds both so a caller sees one Device. Member
// order is the contract: `device_` is declared last, so it is destroyed before the table.
class OwningCudaDevice final : public Device {
 public:
  OwningCudaDevice(std::unique_ptr<cuda::DriverApi> api, std::unique_ptr<cuda::CudaDevice> device)
      : api_(std::move(api)), device_(std::move(device)) {}

  std::string backend() const override { return device_->backend(); }
  std::string name() const override { return device_->name(); }
  std::string arch() const override { return device_->arch(); }
  Result<KernelHandle> load(const std::string& binary, const std::string& kernel_name) override {
    return device_->load(binary, kernel_name);
  }
  Status unload(KernelHandle kernel) override { return device_->unload(kernel); }
  Result<void*> alloc(size_t bytes) override { return device_->alloc(bytes); }
  Status free(void* ptr) override { return device_->free(ptr); }
  Status copy_to_device(void* dst, const void* src, size_t bytes) override {
    return device_->copy_to_device(dst, src, bytes);
  }
  Status copy_to_host(void* dst, const void* src, size_t bytes) override {
    return device_->copy_to_host(dst, src, bytes);
  }
  Status copy_on_device(void* dst, const void* src, size_t bytes) override {
    return device_->copy_on_device(dst, src, bytes);
  }
  Status fill(void* dst, unsigned char byte, size_t bytes) override {
    return device_->fill(dst, byte, bytes);
  }
  Status launch(KernelHandle kernel, const LaunchGeometry& geometry,
                const std::vector<KernelArg>& args) override {
    return device_->launch(kernel, geometry, args);
  }
  Status synchronize() override { return device_->synchronize(); }
  Result<double> time_launch(KernelHandle kernel, const LaunchGeometry& geometry,
                             const std::vector<KernelArg>& args, bool flush_l2) override {
    return device_->time_launch(kernel, geometry, args, flush_l2);
  }
  int sm_clock_mhz() override { return device_->sm_clock_mhz(); }
  Result<KernelArg> tensor_map(const TensorMapArg& map, void* base) override {
    return device_->tensor_map(map, base);
  }
  Result<LaunchProfile> profile_launch(KernelHandle kernel, const LaunchGeometry& geometry,
                                       const std::vector<KernelArg>& args) override {
    return device_->profile_launch(kernel, geometry, args);
  }

 private:
  std::unique_ptr<cuda::DriverApi> api_;
  std::unique_ptr<cuda::CudaDevice> device_;
};
#endif  // KILN_HAVE_CUDA

Result<std::unique_ptr<Device>> open_cuda(int gpu) {
#ifdef KILN_HAVE_CUDA
  if (gpu < 0) {
    return invalid_argument("cuda device ordinal must be >= 0, got " + std::to_string(gpu));
  }
  auto api = cuda::DriverApi::load();
  if (!api.is_ok()) return api.status().with_context("loading the CUDA driver");
  auto device = cuda::CudaDevice::open(**api, gpu);
  if (!device.is_ok()) return device.status();
  return std::unique_ptr<Device>(
      new OwningCudaDevice(std::move(api).value(), std::move(device).value()));
#else
  (void)gpu;
  return unimplemented("this kiln was built without the CUDA backend");
#endif
}

}  // namespace

Result<std::unique_ptr<Device>> open_device(const std::string& backend, int gpu,
                                            const std::string& scratch_dir) {
  if (backend == "cpu") {
    auto device = CpuDevice::create(scratch_dir);
    if (!device.is_ok()) return device.status().with_context("opening the cpu device");
    return std::unique_ptr<Device>(std::move(device).value());
  }
  // A triton kernel is a cubin: it runs on the CUDA device (shared/backends.h).
  if (device_backend(backend) == "cuda") return open_cuda(gpu);
  return invalid_argument("unknown backend '" + backend + "' (expected cpu, cuda or triton)");
}

}  // namespace kiln::eval
