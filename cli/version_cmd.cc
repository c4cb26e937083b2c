// `kiln version`: kiln's build, then the CUDA driver, NVRTC, GPUs and Triton found at run time.
#include "cli/version_cmd.h"

#include <nlohmann/json.hpp>

#include "evaluator/cuda/cuda_probe.h"
#include "evaluator/triton/triton_compiler.h"
#include "shared/build_info.h"

namespace kiln::cli {

std::string version_report(bool json) {
  cuda::CudaProbe p = cuda::probe_cuda();
  // The triton backend's compiler: its Triton version and kiln's compile worker, which a farm's
  // triton evaluators must share (the coordinator refuses one whose toolchain differs).
  Result<std::unique_ptr<eval::TritonCompiler>> triton = eval::TritonCompiler::create();
  if (json) {
    nlohmann::json j;
    j["version"] = KILN_VERSION;
    j["commit"] = KILN_GIT_COMMIT;
#ifdef KILN_HAVE_CUDA
    j["cuda_backend_built"] = true;
#else
    j["cuda_backend_built"] = false;
#endif
    j["driver"] = p.driver_loaded && p.driver_error.empty()
                      ? nlohmann::json(cuda::format_cuda_version(p.driver_version))
                      : nlohmann::json(nullptr);
    if (!p.driver_error.empty()) j["driver_error"] = p.driver_error;
    j["nvrtc"] = p.nvrtc_loaded ? nlohmann::json(std::to_string(p.nvrtc_major) + "." +
                                                 std::to_string(p.nvrtc_minor))
                                : nlohmann::json(nullptr);
    if (!p.nvrtc_error.empty()) j["nvrtc_error"] = p.nvrtc_error;
    j["gpus"] = nlohmann::json::array();
    for (const auto& g : p.gpus) {
      j["gpus"].push_back({{"ordinal", g.ordinal}, {"name", g.name}, {"arch", g.arch()},
                           {"sms", g.sm_count}});
    }
    if (triton.is_ok()) {
      j["triton"] = (*triton)->triton_version();
      j["triton_toolchain"] = (*triton)->toolchain_version();
      j["triton_python"] = (*triton)->python();
    } else {
      j["triton"] = nullptr;
      j["triton_error"] = triton.status().message();
    }
    return j.dump() + "\n";
  }
  std::string out = "kiln " KILN_VERSION " (commit " KILN_GIT_COMMIT ")\n";
#ifdef KILN_HAVE_CUDA
  out += "cuda backend: built\n";
#else
  out += "cuda backend: not built (no CUDA toolkit headers at build time)\n";
#endif
  if (p.driver_loaded && p.driver_error.empty()) {
    out += "CUDA driver: " + cuda::format_cuda_version(p.driver_version) + "\n";
  } else {
    out += "CUDA driver: no CUDA (" + p.driver_error + ")\n";
  }
  if (p.nvrtc_loaded) {
    out += "NVRTC: " + std::to_string(p.nvrtc_major) + "." + std::to_string(p.nvrtc_minor) +
           " (" + p.nvrtc_path + ")\n";
  } else {
    out += "NVRTC: no CUDA (" + p.nvrtc_error + ")\n";
  }
  if (p.gpus.empty()) {
    out += "GPUs: none (kiln runs the cpu backend)\n";
  }
  for (const auto& g : p.gpus) {
    out += "GPU " + std::to_string(g.ordinal) + ": " + g.name + ", " + g.arch() + ", " +
           std::to_string(g.sm_count) + " SMs\n";
  }
  if (triton.is_ok()) {
    out += "Triton: " + (*triton)->triton_version() + " (" + (*triton)->python() +
           "; toolchain: " + (*triton)->toolchain_version() + ")\n";
  } else {
    out += "Triton: none (" + triton.status().message() + ")\n";
  }
  return out;
}

}  // namespace kiln::cli
