// Run-time discovery of the CUDA driver and NVRTC. Only entry points with plain int signatures are
// used here, so this file builds with or without the CUDA toolkit's headers.
#include "evaluator/cuda/cuda_probe.h"

#include <dlfcn.h>

#include <cstdlib>
#include <iterator>
#include <string>
#include <vector>

namespace kiln::cuda {
namespace {

// Driver API entry points used by the probe (CUresult is an int-sized enum; 0 is CUDA_SUCCESS).
using CuInitFn = int (*)(unsigned);
using CuDriverGetVersionFn = int (*)(int*);
using CuDeviceGetCountFn = int (*)(int*);
using CuDeviceGetFn = int (*)(int*, int);
using CuDeviceGetNameFn = int (*)(char*, int, int);
using CuDeviceGetAttributeFn = int (*)(int*, int, int);
using NvrtcVersionFn = int (*)(int*, int*);

constexpr int kAttrMultiprocessorCount = 16;   // CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT
constexpr int kAttrCcMajor = 75;               // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
constexpr int kAttrCcMinor = 76;               // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR

template <typename Fn>
Fn symbol(void* lib, const char* name) {
  return reinterpret_cast<Fn>(dlsym(lib, name));
}

}  // namespace

void* open_nvrtc_library(std::string* path, std::string* error) {
  // Plain names go through the loader's search (LD_LIBRARY_PATH, ld.so.cache, RUNPATH).
  const char* const files[] = {"libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12"};
  std::vector<std::string> candidates(std::begin(files), std::end(files));
  for (const char* env : {"CUDA_HOME", "CUDA_PATH"}) {
    const char* home = std::getenv(env);
    if (home == nullptr || *home == '\0') continue;
    for (const char* file : files) candidates.push_back(std::string(home) + "/lib64/" + file);
  }
  for (const char* file : files) candidates.push_back(std::string("/usr/local/cuda/lib64/") + file);
  std::string last_error;
  for (const std::string& candidate : candidates) {
    if (void* library = dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL)) {
      *path = candidate;
      return library;
    }
    if (const char* e = dlerror()) last_error = e;
  }
  *error =
      "cannot load libnvrtc (tried LD_LIBRARY_PATH, $CUDA_HOME/lib64, $CUDA_PATH/lib64, "
      "/usr/local/cuda/lib64)" +
      (last_error.empty() ? "" : ": " + last_error);
  return nullptr;
}

std::string GpuInfo::arch() const {
  // Architecture-specific targets (the "a" suffix) unlock wgmma/setmaxnreg on sm_90 and the
  // tcgen05 family on sm_100; a cubin built for them runs only on that exact chip, which is what
  // kiln wants: results are per GPU model anyway.
  std::string a = "sm_" + std::to_string(cc_major) + std::to_string(cc_minor);
  if (cc_major >= 9) a += "a";
  return a;
}

std::string format_cuda_version(int version) {
  return std::to_string(version / 1000) + "." + std::to_string((version % 1000) / 10);
}

CudaProbe probe_cuda() {
  CudaProbe p;
  // The driver library is never unloaded: it is process-wide state.
  if (void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL)) {
    p.driver_loaded = true;
    auto cu_init = symbol<CuInitFn>(lib, "cuInit");
    auto get_version = symbol<CuDriverGetVersionFn>(lib, "cuDriverGetVersion");
    auto get_count = symbol<CuDeviceGetCountFn>(lib, "cuDeviceGetCount");
    auto get_device = symbol<CuDeviceGetFn>(lib, "cuDeviceGet");
    auto get_name = symbol<CuDeviceGetNameFn>(lib, "cuDeviceGetName");
    auto get_attr = symbol<CuDeviceGetAttributeFn>(lib, "cuDeviceGetAttribute");
    if (!cu_init || !get_version || !get_count || !get_device || !get_name || !get_attr) {
      p.driver_error = "libcuda.so.1 lacks driver API entry points";
    } else if (int rc = cu_init(0); rc != 0) {
      get_version(&p.driver_version);
      p.driver_error = "cuInit failed with CUresult " + std::to_string(rc) +
                       " (no usable GPU, or driver/device mismatch)";
    } else {
      get_version(&p.driver_version);
      int count = 0;
      get_count(&count);
      for (int i = 0; i < count; ++i) {
        int dev = 0;
        if (get_device(&dev, i) != 0) continue;
        GpuInfo g;
        g.ordinal = i;
        char name[256] = {};
        get_name(name, sizeof(name), dev);
        g.name = name;
        get_attr(&g.cc_major, kAttrCcMajor, dev);
        get_attr(&g.cc_minor, kAttrCcMinor, dev);
        get_attr(&g.sm_count, kAttrMultiprocessorCount, dev);
        p.gpus.push_back(std::move(g));
      }
    }
  } else {
    const char* e = dlerror();
    p.driver_error = std::string("no CUDA driver (libcuda.so.1 not found)") +
                     (e ? std::string(": ") + e : "");
  }
  if (void* lib = open_nvrtc_library(&p.nvrtc_path, &p.nvrtc_error)) {
    if (auto version = symbol<NvrtcVersionFn>(lib, "nvrtcVersion")) {
      p.nvrtc_loaded = version(&p.nvrtc_major, &p.nvrtc_minor) == 0;
      if (!p.nvrtc_loaded) p.nvrtc_error = "nvrtcVersion failed";
    } else {
      p.nvrtc_error = "libnvrtc lacks nvrtcVersion";
    }
  }
  return p;
}

}  // namespace kiln::cuda
