// The backend interface: how a kernel is compiled (in the daemon, on CPU threads) and run (in the
// sandbox child that owns the device). `cuda` (NVRTC + driver API) and `cpu` (system compiler +
// dlopen) implement it; the verifier and timer above it are backend-neutral.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "shared/dtype.h"
#include "shared/status.h"
#include "shared/tensor_map_spec.h"

namespace kiln::eval {

// Element types live in shared/dtype.h (target specs use them too).
using kiln::DType;
using kiln::dtype_bytes;
using kiln::dtype_name;
using kiln::parse_dtype;

// One kernel parameter, in the order the kernel declares them. The calling convention is the
// same for both backends: tensors are passed as pointers, then each dimension as int64_t (in the
// order of the spec's "dims"), then scalars -- see docs/targets.md.
struct ArgSpec {
  enum class Kind { kTensorIn, kTensorOut, kInt64, kFloat32 };
  Kind kind = Kind::kTensorIn;
  DType dtype = DType::kF32;  // element type of a tensor
  std::string name;
};

struct CompileRequest {
  std::string source;                          // kernel source text (device code for cuda)
  std::string kernel_name;                     // extern "C" entry point
  std::map<std::string, std::string> defines;  // -D macros: template parameters, KILN_DTYPE, ...
  std::string arch;                            // "sm_90a", "sm_100a" for cuda; "cpu" for cpu
  std::vector<ArgSpec> signature;              // used by the cpu backend to build its trampoline
};

// A compile error is an expected outcome, not a failure of kiln: ok=false with the log.
struct CompileOutput {
  bool ok = false;
  std::string log;             // compiler messages (also on success: warnings)
  std::string binary;          // cubin bytes (cuda) or shared-object bytes (cpu)
  std::string cache_key;       // content hash of everything that determines `binary`
  double compile_ms = 0;       // 0 when served from the cache; the wait when `shared`
  bool from_cache = false;
  bool shared = false;  // the output of the same compile under way for another request (a prefetch)
  bool rejected = false;       // refused for a policy reason (a banned import), not a syntax error
};

// Compiles on the calling thread; thread-safe, so a pool may call it concurrently.
class Compiler {
 public:
  virtual ~Compiler() = default;
  virtual std::string backend() const = 0;           // "cuda" or "cpu"
  virtual std::string toolchain_version() const = 0;  // part of every cache key
  virtual CompileOutput compile(const CompileRequest& request) = 0;
};

struct LaunchGeometry {
  uint32_t grid[3] = {1, 1, 1};
  uint32_t block[3] = {1, 1, 1};
  uint32_t shared_bytes = 0;  // dynamic shared memory
};

// A kernel argument value as the launch passes it (pointer, int64, float or a 128-byte tensor
// map), kept as raw bytes so that the driver's kernelParams (an array of pointers to values) can
// point at it.
struct KernelArg {
  static constexpr size_t kTensorMapBytes = 128;
  static KernelArg pointer(void* p);
  static KernelArg int64(int64_t v);
  static KernelArg float32(float v);
  static KernelArg tensor_map(const unsigned char (&map)[kTensorMapBytes]);
  alignas(64) unsigned char bytes[kTensorMapBytes] = {};
  size_t size = 0;
};

using KernelHandle = uint64_t;  // opaque, from Device::load

// Device memory and kernel execution. Lives only in the sandbox child; every call may fail with
// a Status when the device is in trouble (a sticky CUDA error makes every later call fail, and
// the child is then replaced).
class Device {
 public:
  virtual ~Device() = default;
  virtual std::string backend() const = 0;
  virtual std::string name() const = 0;   // "NVIDIA H100 80GB HBM3" or the CPU model
  virtual std::string arch() const = 0;   // "sm_90a" or "cpu"

  virtual Result<KernelHandle> load(const std::string& binary, const std::string& kernel_name) = 0;
  virtual Status unload(KernelHandle kernel) = 0;

  virtual Result<void*> alloc(size_t bytes) = 0;  // device memory (host memory for cpu)
  virtual Status free(void* ptr) = 0;
  virtual Status copy_to_device(void* dst, const void* src, size_t bytes) = 0;
  virtual Status copy_to_host(void* dst, const void* src, size_t bytes) = 0;
  // Device memory to device memory (both from alloc); complete when it returns. The timer uses
  // it to give launches fresh inputs between samples.
  virtual Status copy_on_device(void* dst, const void* src, size_t bytes) = 0;
  virtual Status fill(void* dst, unsigned char byte, size_t bytes) = 0;  // poisoning

  virtual Status launch(KernelHandle kernel, const LaunchGeometry& geometry,
                        const std::vector<KernelArg>& args) = 0;
  virtual Status synchronize() = 0;  // device-wide, so work on any stream is waited for

  // One timed launch in microseconds. With `flush_l2` the cache is flushed first (outside the
  // timed region). The stop point is taken after a device-wide synchronization.
  virtual Result<double> time_launch(KernelHandle kernel, const LaunchGeometry& geometry,
                                     const std::vector<KernelArg>& args, bool flush_l2) = 0;

  // SM clock in MHz now, or 0 when the backend cannot tell (throttling detection).
  virtual int sm_clock_mhz() = 0;

  // How long the last flushed time_launch took to read a fixed buffer from memory just before
  // its kernel, in microseconds, or 0 where the backend takes no such probe. It measures the
  // machine, not the kernel: on the cpu backend other processes share the memory the kernel is
  // timed on, and a probe well above its usual time marks a sample taken while they were busy
  // (judge_samples in evaluation.h).
  virtual double machine_probe_us() { return 0; }

  // The tensor map (TMA descriptor) of `map` over the tensor at `base` (from alloc), encoded as
  // the kernel takes it; 128 zero bytes where !map.encodable. kUnimplemented where the backend
  // has none; kInvalidArgument where the driver refuses the layout (the candidate's fault).
  virtual Result<KernelArg> tensor_map(const TensorMapArg& map, void* base) {
    (void)map, (void)base;
    return unimplemented("the " + backend() + " backend has no tensor maps");
  }

  // One launch profiled (see evaluator/profile/): hardware counters and the function's resource
  // use by the keys of evaluator/profile/metric_names.h, and a notice naming what could not be
  // measured (counters not permitted, CUPTI missing, metrics the chip lacks). Complete when it
  // returns; the outputs are left as the launch wrote them. kUnimplemented for a backend
  // without a profiler.
  struct LaunchProfile {
    std::map<std::string, double> values;
    std::string notice;
  };
  virtual Result<LaunchProfile> profile_launch(KernelHandle kernel, const LaunchGeometry& geometry,
                                               const std::vector<KernelArg>& args) {
    (void)kernel, (void)geometry, (void)args;
    return unimplemented("the " + backend() + " backend has no profiler");
  }
};

}  // namespace kiln::eval
