// CudaDevice: context, stream and event setup, module loading, memory, launches, timing, and the
// poisoning of the device after a sticky CUDA error.
#include "evaluator/cuda/cuda_device.h"

#ifdef KILN_HAVE_CUDA

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

#include "evaluator/profile/metric_names.h"
#include "evaluator/triton/triton_binary.h"

namespace kiln::cuda {
namespace {

CUdeviceptr device_ptr(const void* p) { return reinterpret_cast<CUdeviceptr>(p); }

}  // namespace

// Calls `fn` through the device's table and records a sticky error as poison.
#define KILN_DEVICE_CU(fn, ...) note(api_.fn(__VA_ARGS__), #fn, __FILE__, __LINE__)

std::string arch_for_compute_capability(int major, int minor) {
  // The "a" targets unlock wgmma/setmaxnreg (9.0) and tcgen05 (10.0); their cubins run only on
  // that exact chip, which suits kiln: results are per GPU model anyway.
  if (major == 9 && minor == 0) return "sm_90a";
  if (major == 10 && minor == 0) return "sm_100a";
  return "sm_" + std::to_string(major) + std::to_string(minor);
}

CudaDevice::CudaDevice(const DriverApi& api, int ordinal) : api_(api), ordinal_(ordinal) {}

CudaDevice::~CudaDevice() {
  if (!context_) return;
  // Destruction needs the context current; errors are expected (and ignored) once poisoned.
  KILN_CU(api_, cuCtxSetCurrent, context_.get()).ignore();
  cupti_.reset();  // CUPTI's profiler state goes while the context it profiled still exists
  kernels_.clear();
  allocations_.clear();
  flush_buffer_.reset().ignore();
  stop_.reset().ignore();
  start_.reset().ignore();
  stream_.reset().ignore();
  context_.reset().ignore();
}

Result<std::unique_ptr<CudaDevice>> CudaDevice::open(const DriverApi& api, int ordinal) {
  std::unique_ptr<CudaDevice> device(new CudaDevice(api, ordinal));
  if (Status s = device->init(); !s.is_ok()) {
    return s.with_context("opening CUDA device " + std::to_string(ordinal));
  }
  return device;
}

Status CudaDevice::init() {
  KILN_RETURN_IF_ERROR(KILN_DEVICE_CU(cuDeviceGet, &device_, ordinal_));
  char name[256] = {};
  KILN_RETURN_IF_ERROR(KILN_DEVICE_CU(cuDeviceGetName, name, sizeof(name), device_));
  name_ = name;
  int major = 0;
  int minor = 0;
  KILN_RETURN_IF_ERROR(KILN_DEVICE_CU(cuDeviceGetAttribute, &major,
                                      CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device_));
  KILN_RETURN_IF_ERROR(KILN_DEVICE_CU(cuDeviceGetAttribute, &minor,
                                      CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device_));
  arch_ = arch_for_compute_capability(major, minor);
  KILN_RETURN_IF_ERROR(KILN_DEVICE_CU(cuDeviceGetAttribute, &l2_cache_bytes_,
                                      CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, device_));
  char bus_id[64] = {};
  KILN_RETURN_IF_ERROR(KILN_DEVICE_CU(cuDeviceGetPCIBusId, bus_id, sizeof(bus_id), device_));
  pci_bus_id_ = bus_id;

  // A context of our own (not the primary one), so nothing else in the process shares its
  // allocations or its sticky errors. CUDA 13's cuCtxCreate (_v4) takes CUctxCreateParams*;
  // null means no execution affinity and no CIG mode. It also makes the context current here.
  CUcontext context = nullptr;
  KILN_RETURN_IF_ERROR(KILN_DEVICE_CU(cuCtxCreate, &context, nullptr, 0, device_));
  context_ = ContextHandle(api_, context);

  // Non-blocking: the legacy NULL stream never implicitly orders against it, so every operation
  // here is explicitly ordered on stream_ (hazard: never mix in synchronous NULL-stream calls).
  CUstream stream = nullptr;
  KILN_RETURN_IF_ERROR(KILN_DEVICE_CU(cuStreamCreate, &stream, CU_STREAM_NON_BLOCKING));
  stream_ = StreamHandle(api_, stream);
  CUevent start = nullptr;
  KILN_RETURN_IF_ERROR(KILN_DEVICE_CU(cuEventCreate, &start, CU_EVENT_DEFAULT));
  start_ = EventHandle(api_, start);
  CUevent stop = nullptr;
  KILN_RETURN_IF_ERROR(KILN_DEVICE_CU(cuEventCreate, &stop, CU_EVENT_DEFAULT));
  stop_ = EventHandle(api_, stop);
  return Status::ok();
}

Status CudaDevice::note(CUresult result, const char* call, const char* file, int line) {
  Status status = api_.check(result, call, file, line);
  if (!status.is_ok() && poison_.is_ok() && DriverApi::is_sticky(result)) poison_ = status;
  return status;
}

Status CudaDevice::enter() {
  if (!poison_.is_ok()) {
    return failed_precondition("device context is poisoned by an earlier error: " +
                               poison_.message());
  }
  return KILN_DEVICE_CU(cuCtxSetCurrent, context_.get());
}

Result<CudaDevice::Kernel*> CudaDevice::find(eval::KernelHandle kernel) {
  auto it = kernels_.find(kernel);
  if (it == kernels_.end()) {
    return invalid_argument("unknown kernel handle " + std::to_string(kernel));
  }
  return &it->second;
}

Result<eval::KernelHandle> CudaDevice::load(const std::string& binary,
                                            const std::string& kernel_name) {
  KILN_RETURN_IF_ERROR(enter());
  if (binary.empty()) return invalid_argument("load: empty binary");
  Kernel kernel;
  kernel.name = kernel_name;
  if (!eval::is_triton_binary(binary)) {
    KILN_RETURN_IF_ERROR(load_image(binary, kernel));
  } else {
    Result<eval::TritonKernel> decoded = eval::decode_triton_binary(binary);
    if (!decoded.is_ok()) return decoded.status().with_context("load");
    const eval::TritonKernel& triton = *decoded;
    if (triton.num_warps < 1 || triton.num_warps > 32) {
      return invalid_argument("load: a Triton kernel of " + std::to_string(triton.num_warps) +
                              " warps");
    }
    kernel.name = triton.name;
    kernel.hidden_args = triton.hidden_args;
    kernel.threads = 32 * triton.num_warps;
    kernel.min_shared_bytes = triton.shared_bytes;
    KILN_RETURN_IF_ERROR(load_image(triton.cubin, kernel));
    if (kernel.hidden_args > kernel.param_bytes.size()) {
      return invalid_argument("load: the Triton kernel '" + kernel.name + "' has " +
                              std::to_string(kernel.param_bytes.size()) +
                              " parameters, fewer than the " + std::to_string(kernel.hidden_args) +
                              " hidden ones it names");
    }
    if (triton.divisible) {
      auto d = std::make_unique<Kernel>();
      d->name = triton.divisible->name;
      d->hidden_args = kernel.hidden_args;
      d->threads = kernel.threads;
      d->min_shared_bytes = triton.divisible->shared_bytes;
      KILN_RETURN_IF_ERROR(load_image(triton.divisible->cubin, *d));
      if (d->param_bytes != kernel.param_bytes) {
        return invalid_argument("load: the Triton kernel '" + kernel.name +
                                "' and its divisible variant take different parameters");
      }
      const size_t visible = kernel.param_bytes.size() - kernel.hidden_args;
      for (unsigned i : triton.divisible->args) {
        if (i >= visible || (kernel.param_bytes[i] != 4 && kernel.param_bytes[i] != 8)) {
          return invalid_argument("load: the divisible variant of '" + kernel.name +
                                  "' names parameter " + std::to_string(i) +
                                  ", which is not a visible pointer or integer");
        }
      }
      kernel.divisible = std::move(d);
      kernel.divisible_args = triton.divisible->args;
    }
  }
  eval::KernelHandle handle = next_kernel_++;
  kernels_.emplace(handle, std::move(kernel));
  return handle;
}

Status CudaDevice::load_image(const std::string& image, Kernel& kernel) {
  CUmodule module = nullptr;
  KILN_RETURN_IF_ERROR(KILN_DEVICE_CU(cuModuleLoadData, &module, image.data()));
  kernel.module = ModuleHandle(api_, module);
  if (Status s = KILN_DEVICE_CU(cuModuleGetFunction, &kernel.function, module, kernel.name.c_str());
      !s.is_ok()) {
    return s.with_context("kernel '" + kernel.name + "' (is it extern \"C\" __global__?)");
  }
  // cuFuncGetParamInfo answers CUDA_ERROR_INVALID_VALUE past the last parameter.
  for (size_t i = 0;; ++i) {
    size_t offset = 0;
    size_t bytes = 0;
    CUresult result = api_.cuFuncGetParamInfo(kernel.function, i, &offset, &bytes);
    if (result == CUDA_ERROR_INVALID_VALUE) break;
    KILN_RETURN_IF_ERROR(note(result, "cuFuncGetParamInfo", __FILE__, __LINE__));
    kernel.param_bytes.push_back(bytes);
  }
  return Status::ok();
}

Status CudaDevice::unload(eval::KernelHandle kernel) {
  KILN_RETURN_IF_ERROR(enter());
  KILN_ASSIGN_OR_RETURN(Kernel * k, find(kernel));
  CUmodule module = k->module.release();
  CUmodule divisible = k->divisible ? k->divisible->module.release() : nullptr;
  kernels_.erase(kernel);
  if (divisible) KILN_RETURN_IF_ERROR(KILN_DEVICE_CU(cuModuleUnload, divisible));
  return KILN_DEVICE_CU(cuModuleUnload, module);
}

Result<void*> CudaDevice::alloc(size_t bytes) {
  KILN_RETURN_IF_ERROR(enter());
  if (bytes == 0) return invalid_argument("alloc of 0 bytes");
  CUdeviceptr ptr = 0;
  KILN_RETURN_IF_ERROR(KILN_DEVICE_CU(cuMemAlloc, &ptr, bytes));
  allocations_.emplace(ptr, DeviceMemory(api_, ptr));
  return reinterpret_cast<void*>(ptr);
}

Status CudaDevice::free(void* ptr) {
  KILN_RETURN_IF_ERROR(enter());
  auto it = allocations_.find(device_ptr(ptr));
  if (it == allocations_.end()) {
    return invalid_argument("free of a pointer this device did not allocate");
  }
  CUdeviceptr owned = it->second.release();
  allocations_.erase(it);
  return KILN_DEVICE_CU(cuMemFree, owned);
}

// The four memory operations run on stream_ (so they follow earlier launches) and wait for it:
// when they return, the data has arrived.
Status CudaDevice::copy_to_device(void* dst, const void* src, size_t bytes) {
  KILN_RETURN_IF_ERROR(enter());
  KILN_RETURN_IF_ERROR(
      KILN_DEVICE_CU(cuMemcpyHtoDAsync, device_ptr(dst), src, bytes, stream_.get()));
  return KILN_DEVICE_CU(cuStreamSynchronize, stream_.get());
}

Status CudaDevice::copy_to_host(void* dst, const void* src, size_t bytes) {
  KILN_RETURN_IF_ERROR(enter());
  KILN_RETURN_IF_ERROR(
      KILN_DEVICE_CU(cuMemcpyDtoHAsync, dst, device_ptr(src), bytes, stream_.get()));
  return KILN_DEVICE_CU(cuStreamSynchronize, stream_.get());
}

Status CudaDevice::copy_on_device(void* dst, const void* src, size_t bytes) {
  KILN_RETURN_IF_ERROR(enter());
  KILN_RETURN_IF_ERROR(KILN_DEVICE_CU(cuMemcpyDtoDAsync, device_ptr(dst), device_ptr(src), bytes,
                                      stream_.get()));
  return KILN_DEVICE_CU(cuStreamSynchronize, stream_.get());
}

Status CudaDevice::fill(void* dst, unsigned char byte, size_t bytes) {
  KILN_RETURN_IF_ERROR(enter());
  KILN_RETURN_IF_ERROR(
      KILN_DEVICE_CU(cuMemsetD8Async, device_ptr(dst), byte, bytes, stream_.get()));
  return KILN_DEVICE_CU(cuStreamSynchronize, stream_.get());
}

Status CudaDevice::enqueue_launch(Kernel& kernel, const eval::LaunchGeometry& geometry,
                                  const std::vector<eval::KernelArg>& args) {
  if (kernel.divisible) {
    // Triton's divisible variant where every argument it assumes a multiple of 16 is one (an
    // address or an integer, read as the unsigned value of its bytes).
    bool multiples = true;
    for (unsigned i : kernel.divisible_args) {
      if (i >= args.size() || (args[i].size != 4 && args[i].size != 8)) {
        multiples = false;
        break;
      }
      uint64_t v = 0;
      std::memcpy(&v, args[i].bytes, args[i].size);  // little-endian: the low bytes first
      multiples = multiples && v % 16 == 0;
    }
    if (multiples) return enqueue_launch(*kernel.divisible, geometry, args);
  }
  // The driver reads each parameter's size from the cubin, not from us: a mismatched argument
  // list would make it read past our values. Reject it here instead. A Triton kernel's hidden
  // trailing parameters (its scratch pointers) are not the caller's: they go as null.
  const size_t visible = kernel.param_bytes.size() - kernel.hidden_args;
  if (args.size() != visible) {
    return invalid_argument("kernel '" + kernel.name + "' takes " + std::to_string(visible) +
                            " parameters, " + std::to_string(args.size()) + " arguments given");
  }
  const CUdeviceptr null_pointer = 0;
  std::vector<void*> params(kernel.param_bytes.size());
  for (size_t i = 0; i < params.size(); ++i) {
    if (i >= visible) {
      if (kernel.param_bytes[i] != sizeof(CUdeviceptr)) {
        return invalid_argument("kernel '" + kernel.name + "' hidden parameter " +
                                std::to_string(i) + " is " + std::to_string(kernel.param_bytes[i]) +
                                " bytes, not a pointer");
      }
      params[i] = const_cast<CUdeviceptr*>(&null_pointer);
      continue;
    }
    if (args[i].size != kernel.param_bytes[i]) {
      return invalid_argument("kernel '" + kernel.name + "' parameter " + std::to_string(i) +
                              " is " + std::to_string(kernel.param_bytes[i]) +
                              " bytes, argument is " + std::to_string(args[i].size));
    }
    // cuLaunchKernel copies the values before it returns; the const_cast is for its void**.
    params[i] = const_cast<unsigned char*>(args[i].bytes);
  }
  const uint64_t threads =
      static_cast<uint64_t>(geometry.block[0]) * geometry.block[1] * geometry.block[2];
  if (kernel.threads != 0 && threads != kernel.threads) {
    return invalid_argument("kernel '" + kernel.name + "' was compiled by Triton for " +
                            std::to_string(kernel.threads / 32) + " warps (" +
                            std::to_string(kernel.threads) + " threads); the launch gives " +
                            std::to_string(threads));
  }
  const uint32_t shared = std::max<uint32_t>(geometry.shared_bytes, kernel.min_shared_bytes);
  if (shared > kernel.dynamic_shared_limit_bytes) {
    KILN_RETURN_IF_ERROR(KILN_DEVICE_CU(cuFuncSetAttribute, kernel.function,
                                        CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                        static_cast<int>(shared)));
    kernel.dynamic_shared_limit_bytes = shared;
  }
  return KILN_DEVICE_CU(cuLaunchKernel, kernel.function, geometry.grid[0], geometry.grid[1],
                        geometry.grid[2], geometry.block[0], geometry.block[1], geometry.block[2],
                        shared, stream_.get(), params.empty() ? nullptr : params.data(), nullptr);
}

Status CudaDevice::launch(eval::KernelHandle kernel, const eval::LaunchGeometry& geometry,
                          const std::vector<eval::KernelArg>& args) {
  KILN_RETURN_IF_ERROR(enter());
  KILN_ASSIGN_OR_RETURN(Kernel * k, find(kernel));
  return enqueue_launch(*k, geometry, args);
}

Status CudaDevice::synchronize() {
  KILN_RETURN_IF_ERROR(enter());
  return KILN_DEVICE_CU(cuCtxSynchronize);
}

Result<double> CudaDevice::time_launch(eval::KernelHandle kernel,
                                       const eval::LaunchGeometry& geometry,
                                       const std::vector<eval::KernelArg>& args, bool flush_l2) {
  KILN_RETURN_IF_ERROR(enter());
  KILN_ASSIGN_OR_RETURN(Kernel * k, find(kernel));
  if (flush_l2 && l2_cache_bytes_ > 0) {
    // Writing twice the L2's size evicts whatever the kernel's previous run left there. Outside
    // the timed region, but stream-ordered, so the kernel starts after it. HAZARD: the lines it
    // leaves are dirty, so the kernel's first misses also cost write-backs of this buffer.
    if (!flush_buffer_) {
      flush_bytes_ = 2 * static_cast<size_t>(l2_cache_bytes_);
      CUdeviceptr buffer = 0;
      KILN_RETURN_IF_ERROR(KILN_DEVICE_CU(cuMemAlloc, &buffer, flush_bytes_));
      flush_buffer_ = DeviceMemory(api_, buffer);
    }
    ++flush_byte_;  // a new value each time, so no write is skipped as unchanged
    KILN_RETURN_IF_ERROR(KILN_DEVICE_CU(cuMemsetD8Async, flush_buffer_.get(), flush_byte_,
                                        flush_bytes_, stream_.get()));
  }
  KILN_RETURN_IF_ERROR(KILN_DEVICE_CU(cuEventRecord, start_.get(), stream_.get()));
  KILN_RETURN_IF_ERROR(enqueue_launch(*k, geometry, args));
  KILN_RETURN_IF_ERROR(KILN_DEVICE_CU(cuEventRecord, stop_.get(), stream_.get()));
  // Device-wide, so nothing launched in this sample is still running when the next begins, and
  // a fault in the kernel surfaces here. Candidates cannot start work elsewhere: the sandbox owns
  // stream creation and NVRTC builds without -rdc, so device-side launches cannot link.
  KILN_RETURN_IF_ERROR(KILN_DEVICE_CU(cuCtxSynchronize));
  float elapsed_ms = 0;
  KILN_RETURN_IF_ERROR(KILN_DEVICE_CU(cuEventElapsedTime, &elapsed_ms, start_.get(), stop_.get()));
  return static_cast<double>(elapsed_ms) * 1000.0;
}

int CudaDevice::sm_clock_mhz() { return api_.sm_clock_mhz(pci_bus_id_); }

Result<eval::KernelArg> CudaDevice::tensor_map(const TensorMapArg& m, void* base) {
  static_assert(sizeof(CUtensorMap) == eval::KernelArg::kTensorMapBytes);
  unsigned char bytes[eval::KernelArg::kTensorMapBytes] = {};
  if (!m.encodable) return eval::KernelArg::tensor_map(bytes);
  CUtensorMapDataType type = CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
  switch (m.dtype) {
    case DType::kF16:
      type = CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
      break;
    case DType::kBF16:
      type = CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
      break;
    case DType::kF32:
      type = CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
      break;
    case DType::kF64:
      type = CU_TENSOR_MAP_DATA_TYPE_FLOAT64;
      break;
    case DType::kI32:
      type = CU_TENSOR_MAP_DATA_TYPE_INT32;
      break;
    case DType::kI64:
      type = CU_TENSOR_MAP_DATA_TYPE_INT64;
      break;
  }
  CUtensorMapSwizzle swizzle = CU_TENSOR_MAP_SWIZZLE_NONE;
  if (m.swizzle == 32) swizzle = CU_TENSOR_MAP_SWIZZLE_32B;
  if (m.swizzle == 64) swizzle = CU_TENSOR_MAP_SWIZZLE_64B;
  if (m.swizzle == 128) swizzle = CU_TENSOR_MAP_SWIZZLE_128B;
  const std::vector<cuuint64_t> dims(m.dims.begin(), m.dims.end());
  const std::vector<cuuint64_t> strides(m.strides_bytes.begin(), m.strides_bytes.end());
  const std::vector<cuuint32_t> box(m.box.begin(), m.box.end());
  const std::vector<cuuint32_t> element_strides(m.dims.size(), 1);
  CUtensorMap map;
  const CUresult r = api_.cuTensorMapEncodeTiled(
      &map, type, static_cast<cuuint32_t>(dims.size()), base, dims.data(),
      strides.empty() ? nullptr : strides.data(), box.data(), element_strides.data(),
      CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle, CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
      CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) {
    // Not the device's trouble (nothing was launched): the layout the spec asked for.
    return invalid_argument("cuTensorMapEncodeTiled refused the tensor map of tensor " +
                            std::to_string(m.tensor) + ": " + api_.error_name(r));
  }
  std::memcpy(bytes, &map, sizeof(map));
  return eval::KernelArg::tensor_map(bytes);
}

Result<KernelAttributes> CudaDevice::kernel_attributes(eval::KernelHandle kernel) {
  KILN_RETURN_IF_ERROR(enter());
  KILN_ASSIGN_OR_RETURN(Kernel * k, find(kernel));
  KernelAttributes a;
  KILN_RETURN_IF_ERROR(KILN_DEVICE_CU(cuFuncGetAttribute, &a.registers_per_thread,
                                      CU_FUNC_ATTRIBUTE_NUM_REGS, k->function));
  KILN_RETURN_IF_ERROR(KILN_DEVICE_CU(cuFuncGetAttribute, &a.local_bytes_per_thread,
                                      CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, k->function));
  KILN_RETURN_IF_ERROR(KILN_DEVICE_CU(cuFuncGetAttribute, &a.static_shared_bytes,
                                      CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, k->function));
  KILN_RETURN_IF_ERROR(KILN_DEVICE_CU(cuFuncGetAttribute, &a.max_threads_per_block,
                                      CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, k->function));
  return a;
}

Result<eval::Device::LaunchProfile> CudaDevice::profile_launch(
    eval::KernelHandle kernel, const eval::LaunchGeometry& geometry,
    const std::vector<eval::KernelArg>& args) {
  KILN_ASSIGN_OR_RETURN(KernelAttributes a, kernel_attributes(kernel));
  KILN_ASSIGN_OR_RETURN(Kernel * k, find(kernel));
  LaunchProfile out;
  const double block_threads =
      static_cast<double>(geometry.block[0]) * geometry.block[1] * geometry.block[2];
  out.values[profile::kRegistersKey] = a.registers_per_thread;
  out.values[profile::kLocalBytesKey] = a.local_bytes_per_thread;
  out.values[profile::kStaticSharedKey] = a.static_shared_bytes;
  out.values[profile::kDynamicSharedKey] = geometry.shared_bytes;
  out.values[profile::kBlockThreadsKey] = block_threads;

  std::string notice;
  if (cupti_off_.empty() && cupti_ == nullptr) {
    auto loaded = profile::CuptiProfiler::load();
    if (loaded.is_ok()) cupti_ = std::move(loaded).value();
    else cupti_off_ = loaded.status().message();
  }
  if (cupti_ != nullptr) {
    std::vector<std::string> names;
    for (const profile::CounterMetric& m : profile::kCounterMetrics) names.emplace_back(m.cupti_name);
    auto launch = [&]() -> Status {
      KILN_RETURN_IF_ERROR(enqueue_launch(*k, geometry, args));
      return KILN_DEVICE_CU(cuCtxSynchronize);
    };
    KILN_RETURN_IF_ERROR(enter());
    Result<profile::CounterReading> reading =
        cupti_->measure(context_.get(), ordinal_, names, launch);
    // A fault of the kernel itself poisons the device: that is the caller's error, not a notice.
    KILN_RETURN_IF_ERROR(poison_);
    if (reading.is_ok()) {
      for (const auto& [name, value] : reading->values) {
        if (const char* key = profile::key_of_cupti_metric(name)) out.values[key] = value;
      }
      if (!reading->unsupported.empty()) {
        notice = "metrics this chip does not support:";
        for (const auto& m : reading->unsupported) notice += " " + m;
      }
    } else {
      notice = reading.status().message();
      if (profile::is_permission_denied(reading.status()) ||
          reading.status().code() == StatusCode::kUnimplemented) {
        cupti_off_ = notice;  // will not change in this process: do not retry every candidate
        cupti_.reset();
      }
    }
  }
  if (!cupti_off_.empty()) notice = cupti_off_;
  if (cupti_ == nullptr) {
    // No counters: the launch still runs once, so the function is opted into its shared size.
    KILN_RETURN_IF_ERROR(enter());
    KILN_RETURN_IF_ERROR(enqueue_launch(*k, geometry, args));
    KILN_RETURN_IF_ERROR(KILN_DEVICE_CU(cuCtxSynchronize));
  }

  // Theoretical occupancy: the resident warps the limits allow (registers, shared memory, block
  // size) over the SM's warp slots. Asked after the launch, which opts the function into dynamic
  // shared memory over 48 KB (the query fails for a size the function does not accept yet).
  KILN_RETURN_IF_ERROR(enter());
  int blocks = 0;
  int threads_per_sm = 0;
  KILN_RETURN_IF_ERROR(KILN_DEVICE_CU(cuOccupancyMaxActiveBlocksPerMultiprocessor, &blocks,
                                      k->function, static_cast<int>(block_threads),
                                      static_cast<size_t>(geometry.shared_bytes)));
  KILN_RETURN_IF_ERROR(KILN_DEVICE_CU(cuDeviceGetAttribute, &threads_per_sm,
                                      CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR, device_));
  out.values[profile::kBlocksPerSmKey] = blocks;
  if (threads_per_sm > 0) {
    const double warps_per_block = std::ceil(block_threads / 32.0);
    out.values[profile::kTheoreticalOccupancyKey] =
        std::min(100.0, 100.0 * blocks * warps_per_block / (threads_per_sm / 32.0));
  }
  out.notice = std::move(notice);
  return out;
}

}  // namespace kiln::cuda

#endif  // KILN_HAVE_CUDA
