// Kernel backends and the devices they run on. A backend is how a target's kernels are written
// and compiled: "cuda" (CUDA C++ through NVRTC), "cpu" (C++ through the host compiler) or
// "triton" (Python through Triton). A Triton kernel compiles to a cubin, so the triton backend
// runs on the same CUDA device as the cuda backend: its sandbox, ceilings and timing are the cuda
// backend's; only the compiler and the kernels' language differ.
#pragma once

#include <string_view>

namespace kiln {

// Every backend a target may carry, in the order kiln prefers them where a choice is made.
inline constexpr std::string_view kBackends[] = {"cuda", "cpu", "triton"};

inline bool is_backend(std::string_view backend) {
  for (std::string_view b : kBackends) {
    if (b == backend) return true;
  }
  return false;
}

// The device that `backend`'s kernels run on: "cuda" for cuda and triton, "cpu" for cpu; another
// name is returned as it is (the caller refuses it).
inline std::string_view device_backend(std::string_view backend) {
  return backend == "triton" ? std::string_view("cuda") : backend;
}

// Whether `backend`'s kernels run on a GPU (one evaluator per GPU, --gpu N, GPU models by name).
inline bool runs_on_gpu(std::string_view backend) { return device_backend(backend) == "cuda"; }

}  // namespace kiln
