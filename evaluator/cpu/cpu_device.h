// The cpu backend's device: loads CpuCompiler's shared objects with dlopen and runs them on the
// calling thread; "device memory" is 64-byte aligned host memory.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "evaluator/backend.h"

namespace kiln::eval {

// Hazard: the candidate is host code running in the very process that times it. It can read and
// write anything here -- the clocks (steady_clock goes through the vDSO), the caller's stack, the
// scratch buffer, other kernels' memory -- and its static constructors run inside load(). So the
// verifier, the reference and the checker must live in ANOTHER process than the one that owns a
// CpuDevice (the sandbox child), verdicts must not be taken from this process's word alone, and
// sources pass scan_source (source_scan.h) before they are compiled. A kernel that never returns
// blocks launch() forever: the sandbox watchdog, not this class, handles that.
//
// Thread-safe: load/unload/alloc/free take a lock; launches run concurrently outside it.
class CpuDevice : public Device {
 public:
  // `scratch_dir` is where binaries are written for dlopen (empty: $TMPDIR or /tmp); it must not
  // be mounted noexec. Fails when no private directory can be made there.
  static Result<std::unique_ptr<CpuDevice>> create(const std::string& scratch_dir = "");
  ~CpuDevice() override;
  CpuDevice(const CpuDevice&) = delete;
  CpuDevice& operator=(const CpuDevice&) = delete;

  std::string backend() const override { return "cpu"; }
  std::string name() const override { return name_; }  // "model name" from /proc/cpuinfo
  std::string arch() const override { return "cpu"; }

  Result<KernelHandle> load(const std::string& binary, const std::string& kernel_name) override;
  Status unload(KernelHandle kernel) override;

  Result<void*> alloc(size_t bytes) override;
  Status free(void* ptr) override;  // nullptr is a no-op; a pointer not from alloc() is an error
  Status copy_to_device(void* dst, const void* src, size_t bytes) override;
  Status copy_to_host(void* dst, const void* src, size_t bytes) override;
  Status copy_on_device(void* dst, const void* src, size_t bytes) override;
  Status fill(void* dst, unsigned char byte, size_t bytes) override;

  // Geometry is ignored: the kernel runs once, on the calling thread. The argument count and
  // each argument's size are checked against what the trampoline recorded at compile time.
  Status launch(KernelHandle kernel, const LaunchGeometry& geometry,
                const std::vector<KernelArg>& args) override;
  Status synchronize() override { return Status::ok(); }  // launches are synchronous
  // The calling thread's CPU time (CLOCK_THREAD_CPUTIME_ID) around the call: time spent
  // descheduled while other processes run is not counted. With flush_l2, a 64 MiB scratch buffer
  // is written first (outside the timed region) to evict the caches; CPUs with a larger
  // last-level cache than that are timed partly warm. Then, still outside the timed region, the
  // memory probe reads a 256 KiB buffer the flush evicted (machine_probe_us).
  Result<double> time_launch(KernelHandle kernel, const LaunchGeometry& geometry,
                             const std::vector<KernelArg>& args, bool flush_l2) override;
  int sm_clock_mhz() override { return 0; }
  // The probe of the last flushed time_launch, by the same clock as the kernel; 0 before one.
  // Memory traffic of other processes (a compile, another program streaming memory) slows it
  // as it slows a memory-bound kernel. The kernel cannot slow it: it runs before the kernel,
  // after the flush has written over whatever the previous launch left in the caches.
  double machine_probe_us() override;

 private:
  using EntryFn = void (*)(void**);
  struct LoadedKernel {
    void* library = nullptr;  // dlopen handle
    EntryFn entry = nullptr;
    std::vector<int64_t> arg_bytes;  // one per parameter
  };

  CpuDevice(std::string scratch_dir, std::string name);
  Result<LoadedKernel> find_kernel(KernelHandle kernel) const;
  static Status check_args(const LoadedKernel& kernel, const std::vector<KernelArg>& args);
  void flush_caches();
  double probe_memory();  // the probe; the caller holds mutex_

  const std::string scratch_dir_;  // private (0700), made by create(), removed on destruction
  const std::string name_;
  mutable std::mutex mutex_;
  std::map<KernelHandle, LoadedKernel> kernels_;
  std::set<void*> allocations_;
  KernelHandle next_handle_ = 1;
  uint64_t next_file_ = 0;  // binaries get names never reused, see load()
  std::unique_ptr<unsigned char[]> flush_buffer_;  // allocated on the first flush
  unsigned char flush_byte_ = 0;
  std::unique_ptr<uint64_t[]> probe_buffer_;  // allocated and filled on the first flush
  uint64_t probe_sum_ = 0;                    // kept so the probe's reads cannot be dropped
  double last_probe_us_ = 0;
};

}  // namespace kiln::eval
