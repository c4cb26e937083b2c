// The cpu backend's device: dlopen-based kernel loading, argument checks against the trampoline's
// record, aligned host allocations and timing by the calling thread's CPU clock.
#include "evaluator/cpu/cpu_device.h"
#include "shared/text.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>

namespace kiln::eval {
namespace {

constexpr size_t kAlignmentBytes = 64;             // a cache line; enough for AVX-512 loads
constexpr size_t kFlushBytes = size_t{64} << 20;   // larger than most last-level caches
constexpr size_t kProbeWords = size_t{32} << 10;   // 256 KiB: tens of microseconds from memory
constexpr int64_t kMaxArgs = 1024;                 // sanity bound on a binary's record

std::string dl_error() {
  const char* e = dlerror();
  return e != nullptr ? e : "unknown dlopen error";
}

std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("model name", 0) != 0) continue;
    size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    size_t begin = line.find_first_not_of(" \t", colon + 1);
    if (begin != std::string::npos) return line.substr(begin);
  }
  return "unknown cpu";  // e.g. some arm64 kernels print no model name
}

Status write_all(int fd, const std::string& data) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return unavailable(errno_text(errno));
    done += static_cast<size_t>(n);
  }
  return Status::ok();
}

}  // namespace

Result<std::unique_ptr<CpuDevice>> CpuDevice::create(const std::string& scratch_dir) {
  std::string parent = scratch_dir;
  if (parent.empty()) {
    const char* tmp = std::getenv("TMPDIR");
    parent = tmp != nullptr && *tmp != '\0' ? tmp : "/tmp";
  }
  std::string pattern = parent + "/kiln-cpu-device-XXXXXX";
  if (mkdtemp(pattern.data()) == nullptr) {
    return unavailable("creating the cpu device's directory under " + parent + ": " +
                       errno_text(errno));
  }
  return std::unique_ptr<CpuDevice>(new CpuDevice(std::move(pattern), cpu_model_name()));
}

CpuDevice::CpuDevice(std::string scratch_dir, std::string name)
    : scratch_dir_(std::move(scratch_dir)), name_(std::move(name)) {}

CpuDevice::~CpuDevice() {
  for (auto& [handle, kernel] : kernels_) dlclose(kernel.library);
  for (void* p : allocations_) std::free(p);
  rmdir(scratch_dir_.c_str());  // empty: load() unlinks each binary once it is mapped
}

Result<KernelHandle> CpuDevice::load(const std::string& binary, const std::string& kernel_name) {
  // Hazard: glibc's dlopen returns an already-loaded library whose NAME matches, without reading
  // the file. So every binary gets a path never used before in this process: a private
  // directory plus a counter (a recycled /proc/self/fd/N of a memfd would hand back an old kernel).
  std::string path;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    path = scratch_dir_ + "/kernel-" + std::to_string(next_file_++) + ".so";
  }
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0700);
  if (fd < 0) return unavailable("creating " + path + ": " + errno_text(errno));
  Status written = write_all(fd, binary);
  close(fd);
  if (!written.is_ok()) {
    unlink(path.c_str());
    return written.with_context("writing " + path);
  }
  // RTLD_LOCAL: two candidates defining the same symbol names must not bind to each other.
  // Static constructors in the binary run here (see the hazard in the header).
  void* library = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  unlink(path.c_str());  // the mapping outlives the name
  if (library == nullptr) {
    return invalid_argument("loading kernel '" + kernel_name + "': dlopen: " + dl_error());
  }
  auto fail = [&](std::string message) -> Status {
    dlclose(library);
    return invalid_argument("loading kernel '" + kernel_name + "': " + message);
  };
  LoadedKernel kernel;
  kernel.library = library;
  kernel.entry = reinterpret_cast<EntryFn>(dlsym(library, "kiln_entry"));
  auto* count = static_cast<const int64_t*>(dlsym(library, "kiln_arg_count"));
  auto* bytes = static_cast<const int64_t*>(dlsym(library, "kiln_arg_bytes"));
  if (kernel.entry == nullptr || count == nullptr || bytes == nullptr) {
    return fail("the binary lacks the kiln trampoline (kiln_entry, kiln_arg_count, "
                "kiln_arg_bytes): not built by CpuCompiler?");
  }
  if (dlsym(library, kernel_name.c_str()) == nullptr) {
    return fail("the binary has no function '" + kernel_name + "'");
  }
  if (*count < 0 || *count > kMaxArgs) {
    return fail("implausible argument count " + std::to_string(*count));
  }
  kernel.arg_bytes.assign(bytes, bytes + *count);

  std::lock_guard<std::mutex> lock(mutex_);
  KernelHandle handle = next_handle_++;
  kernels_.emplace(handle, std::move(kernel));
  return handle;
}

Status CpuDevice::unload(KernelHandle kernel) {
  void* library = nullptr;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = kernels_.find(kernel);
    if (it == kernels_.end()) return not_found("unload: no kernel with handle " + std::to_string(kernel));
    library = it->second.library;
    kernels_.erase(it);
  }
  if (dlclose(library) != 0) return internal_error("unload: dlclose: " + dl_error());
  return Status::ok();
}

Result<void*> CpuDevice::alloc(size_t bytes) {
  // aligned_alloc needs a size that is a multiple of the alignment; 0 bytes still gets a unique
  // pointer, as callers poison and compare buffers by address.
  size_t rounded = (std::max<size_t>(bytes, 1) + kAlignmentBytes - 1) / kAlignmentBytes * kAlignmentBytes;
  if (rounded < bytes) return out_of_range("alloc: " + std::to_string(bytes) + " bytes is too large");
  void* p = std::aligned_alloc(kAlignmentBytes, rounded);
  if (p == nullptr) {
    return Status(StatusCode::kResourceExhausted,
                  "alloc: out of host memory for " + std::to_string(bytes) + " bytes");
  }
  std::lock_guard<std::mutex> lock(mutex_);
  allocations_.insert(p);
  return p;
}

Status CpuDevice::free(void* ptr) {
  if (ptr == nullptr) return Status::ok();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (allocations_.erase(ptr) == 0) {
      return invalid_argument("free: pointer was not returned by this device's alloc()");
    }
  }
  std::free(ptr);
  return Status::ok();
}

Status CpuDevice::copy_to_device(void* dst, const void* src, size_t bytes) {
  if (bytes > 0 && (dst == nullptr || src == nullptr)) {
    return invalid_argument("copy_to_device: null pointer for " + std::to_string(bytes) + " bytes");
  }
  if (bytes > 0) std::memcpy(dst, src, bytes);
  return Status::ok();
}

Status CpuDevice::copy_to_host(void* dst, const void* src, size_t bytes) {
  if (bytes > 0 && (dst == nullptr || src == nullptr)) {
    return invalid_argument("copy_to_host: null pointer for " + std::to_string(bytes) + " bytes");
  }
  if (bytes > 0) std::memcpy(dst, src, bytes);
  return Status::ok();
}

Status CpuDevice::copy_on_device(void* dst, const void* src, size_t bytes) {
  if (bytes > 0 && (dst == nullptr || src == nullptr)) {
    return invalid_argument("copy_on_device: null pointer for " + std::to_string(bytes) + " bytes");
  }
  if (bytes > 0) std::memcpy(dst, src, bytes);
  return Status::ok();
}

Status CpuDevice::fill(void* dst, unsigned char byte, size_t bytes) {
  if (bytes > 0 && dst == nullptr) return invalid_argument("fill: null pointer");
  if (bytes > 0) std::memset(dst, byte, bytes);
  return Status::ok();
}

Result<CpuDevice::LoadedKernel> CpuDevice::find_kernel(KernelHandle kernel) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = kernels_.find(kernel);
  if (it == kernels_.end()) return not_found("no kernel with handle " + std::to_string(kernel));
  return it->second;
}

Status CpuDevice::check_args(const LoadedKernel& kernel, const std::vector<KernelArg>& args) {
  // The trampoline reads args[i] as its parameter type: a short list would read past the array.
  if (args.size() != kernel.arg_bytes.size()) {
    return invalid_argument("kernel takes " + std::to_string(kernel.arg_bytes.size()) +
                            " arguments, launch passed " + std::to_string(args.size()));
  }
  for (size_t i = 0; i < args.size(); ++i) {
    if (static_cast<int64_t>(args[i].size) != kernel.arg_bytes[i]) {
      return invalid_argument("argument " + std::to_string(i) + " is " +
                              std::to_string(args[i].size) + " bytes, the kernel expects " +
                              std::to_string(kernel.arg_bytes[i]));
    }
  }
  return Status::ok();
}

Status CpuDevice::launch(KernelHandle kernel, const LaunchGeometry& /*geometry*/,
                         const std::vector<KernelArg>& args) {
  Result<LoadedKernel> found = find_kernel(kernel);
  if (!found.is_ok()) return found.status().with_context("launch");
  KILN_RETURN_IF_ERROR(check_args(*found, args));
  std::vector<void*> pointers;
  pointers.reserve(args.size());
  for (const KernelArg& a : args) pointers.push_back(const_cast<unsigned char*>(a.bytes));
  found->entry(pointers.data());
  return Status::ok();
}

void CpuDevice::flush_caches() {
  if (!flush_buffer_) flush_buffer_ = std::make_unique<unsigned char[]>(kFlushBytes);
  if (!probe_buffer_) {  // filled before the flush evicts it, as every later probe finds it
    probe_buffer_ = std::make_unique<uint64_t[]>(kProbeWords);
    for (size_t i = 0; i < kProbeWords; ++i) probe_buffer_[i] = i * 0x9E3779B97F4A7C15ull;
  }
  // A new byte each time so every line is really written; the buffer is a member that outlives
  // the call, so the compiler cannot drop the stores.
  std::memset(flush_buffer_.get(), ++flush_byte_, kFlushBytes);
}

double CpuDevice::probe_memory() {
  timespec start{}, stop{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &start);
  uint64_t sum = 0;
  for (size_t i = 0; i < kProbeWords; ++i) sum += probe_buffer_[i];
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &stop);
  probe_sum_ += sum;
  return (stop.tv_sec - start.tv_sec) * 1e6 + (stop.tv_nsec - start.tv_nsec) * 1e-3;
}

double CpuDevice::machine_probe_us() {
  std::lock_guard<std::mutex> lock(mutex_);
  return last_probe_us_;
}

Result<double> CpuDevice::time_launch(KernelHandle kernel, const LaunchGeometry& /*geometry*/,
                                      const std::vector<KernelArg>& args, bool flush_l2) {
  Result<LoadedKernel> found = find_kernel(kernel);
  if (!found.is_ok()) return found.status().with_context("time_launch");
  KILN_RETURN_IF_ERROR(check_args(*found, args));
  std::vector<void*> pointers;
  pointers.reserve(args.size());
  for (const KernelArg& a : args) pointers.push_back(const_cast<unsigned char*>(a.bytes));
  if (flush_l2) {
    std::lock_guard<std::mutex> lock(mutex_);  // one flush buffer for all threads
    flush_caches();
    last_probe_us_ = probe_memory();
  }
  // The call is through a pointer into another shared object, so the compiler cannot move
  // either clock read across it. The clock is this thread's CPU time, not the wall: time the
  // scheduler gives to other processes is not the kernel's, and on a loaded machine (a CI runner,
  // a shared box) wall-clock samples of the same kernel spread by 50% and more. The kernel runs on
  // this thread alone -- threads, fork and raw syscalls are refused by scan_source -- so its CPU
  // time is all the work it does, stalls on memory included.
  timespec start{}, stop{};
  if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &start) != 0) {
    return internal_error(std::string("time_launch: the thread CPU clock: ") + std::strerror(errno));
  }
  found->entry(pointers.data());
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &stop);
  return (stop.tv_sec - start.tv_sec) * 1e6 + (stop.tv_nsec - start.tv_nsec) * 1e-3;
}

}  // namespace kiln::eval
