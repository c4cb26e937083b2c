// Finds the CUDA driver (libcuda) and NVRTC at run time, without linking either, and reports what
// is there. kiln starts on machines with no GPU driver; this probe is how it finds out.
#pragma once

#include <string>
#include <vector>

namespace kiln::cuda {

struct GpuInfo {
  int ordinal = 0;
  std::string name;          // "NVIDIA H100 80GB HBM3"
  int cc_major = 0;          // compute capability
  int cc_minor = 0;
  int sm_count = 0;
  std::string arch() const;  // exact NVRTC target: "sm_90a" on Hopper, "sm_100a" on Blackwell
};

struct CudaProbe {
  bool driver_loaded = false;
  std::string driver_error;   // why the driver is unusable (empty when loaded and initialised)
  int driver_version = 0;     // e.g. 13000 for CUDA 13.0
  bool nvrtc_loaded = false;
  std::string nvrtc_error;
  std::string nvrtc_path;     // the file dlopen found
  int nvrtc_major = 0;
  int nvrtc_minor = 0;
  std::vector<GpuInfo> gpus;
};

// Loads libcuda.so.1 and libnvrtc (from LD_LIBRARY_PATH, the system, $CUDA_HOME/lib64 or
// /usr/local/cuda/lib64) and queries versions and devices. Creates no CUDA context.
CudaProbe probe_cuda();

// dlopen()s NVRTC: libnvrtc.so (then .13, .12) through the loader's search, then under
// $CUDA_HOME/lib64, $CUDA_PATH/lib64 and /usr/local/cuda/lib64; its path in `path`, else null and
// what was tried in `error`. The probe and NvrtcCompiler both load it this way.
void* open_nvrtc_library(std::string* path, std::string* error);

// "13.0" from 13000.
std::string format_cuda_version(int version);

}  // namespace kiln::cuda
