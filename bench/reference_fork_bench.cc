// What running the reference in a forked child costs per call (evaluator/forked_call.h), and why
// the evaluator keeps its large buffers (inputs, squares, reference outputs) in shared pages: a
// fork copies the page tables of the process's private memory, not those of its MAP_SHARED
// mappings. Per size: run_forked of an empty function with that much private memory touched, and
// with that much in a SharedDoubles instead. --cuda first initialises the CUDA driver and loads
// NVRTC as `kiln eval` does (cuda::probe_cuda), to show what that costs each fork.
//   build/bench/kiln_bench_reference_fork [--calls N] [--mb 0,256,1024,2048] [--cuda]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "evaluator/cuda/cuda_probe.h"
#include "evaluator/forked_call.h"
#include "evaluator/shared_pages.h"

using namespace kiln;
using Clock = std::chrono::steady_clock;

namespace {

double ms_per_call(int calls) {
  const auto t0 = Clock::now();
  for (int i = 0; i < calls; ++i) {
    Status st = eval::run_forked([] {}, std::chrono::seconds(60), "an empty function");
    if (!st.is_ok()) {
      std::fprintf(stderr, "%s\n", st.to_string().c_str());
      std::exit(1);
    }
  }
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count() / calls;
}

}  // namespace

int main(int argc, char** argv) {
  int calls = 100;
  std::string sizes = "0,256,1024,2048";
  bool cuda = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--cuda") == 0) cuda = true;
    if (i + 1 >= argc) continue;
    if (std::strcmp(argv[i], "--calls") == 0) calls = std::max(1, std::atoi(argv[i + 1]));
    if (std::strcmp(argv[i], "--mb") == 0) sizes = argv[i + 1];
  }
  if (cuda) {
    const cuda::CudaProbe p = cuda::probe_cuda();
    std::printf("CUDA driver: %s; NVRTC: %s\n",
                p.driver_loaded && p.driver_error.empty() ? "initialised" : p.driver_error.c_str(),
                p.nvrtc_loaded ? "loaded" : "not loaded");
  }
  {
    std::ifstream status("/proc/self/status");
    for (std::string line; std::getline(status, line);)
      if (line.rfind("RssAnon", 0) == 0 || line.rfind("VmRSS", 0) == 0)
        std::printf("%s\n", line.c_str());
  }
  std::printf("| MB held | private: ms per call | shared: ms per call |\n|---|---|---|\n");
  std::stringstream list(sizes);
  for (std::string item; std::getline(list, item, ',');) {
    const size_t mb = std::strtoull(item.c_str(), nullptr, 10);
    const size_t n = (mb << 20) / sizeof(double);
    double private_ms, shared_ms;
    {
      std::vector<double> held(n, 1.0);
      private_ms = ms_per_call(calls);
    }
    {
      eval::SharedDoubles held(n, 1.0);
      shared_ms = ms_per_call(calls);
    }
    std::printf("| %zu | %.3f | %.3f |\n", mb, private_ms, shared_ms);
  }
}
