// Evaluating one candidate here: see local_eval.h.
#include "cli/local_eval.h"

#include <filesystem>

#include "cli/version_cmd.h"
#include "evaluator/ceilings.h"
#include "evaluator/cuda/cuda_probe.h"
#include "evaluator/toolchain.h"
#include "shared/backends.h"

namespace kiln::cli {

std::string backend_unavailable_here(const std::string& backend) {
  if (backend == "cpu") return "";
  if (!runs_on_gpu(backend)) return "kiln has no " + backend + " backend";
  // triton too: its kernels run on the CUDA device, whose ceilings the cuda backend's probes
  // (NVRTC) measure.
  const cuda::CudaProbe p = cuda::probe_cuda();
  if (!p.driver_loaded) return p.driver_error;
  if (!p.nvrtc_loaded) return "no NVRTC here (" + p.nvrtc_error + ")";
  if (p.gpus.empty()) return "no GPU here";
  return "";
}

Result<LocalEval> evaluate_here(const TargetSpec& target, const std::string& backend,
                                const eval::CandidateSpec& candidate, DType dtype,
                                const LocalEvalOptions& o) {
  eval::EvaluatorOptions options;
  options.kiln_binary = std::filesystem::read_symlink("/proc/self/exe").string();
  options.cache_dir = o.cache_dir.empty() ? eval::default_cache_dir() : o.cache_dir;
  options.gpu = o.gpu;
  options.time = o.time;
  options.benchmark_override = o.benchmark_override;
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<eval::Toolchain> tc,
                        eval::Toolchain::create(backend, options.cache_dir));
  if (options.time) {
    eval::SandboxOptions so{options.kiln_binary, backend, options.gpu, 0};
    KILN_ASSIGN_OR_RETURN(eval::Ceilings ceil,
                          eval::load_or_measure_ceilings(so, tc->compiler(), options.cache_dir,
                                                         eval::CeilingsMode::kUseCache));
    options.bandwidth_bytes_per_s = eval::floor_bandwidth(ceil);
    options.matrix_flops_per_s = ceil.matrix_flops_per_s;
    options.attainable_flops_per_s = ceil.attainable_flops_per_s;
  }
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<eval::CandidateEvaluator> ev,
                        eval::CandidateEvaluator::create(target, backend, tc->compiler(), options));
  LocalEval out;
  out.result = ev->evaluate(candidate, dtype, o.progress);
  out.device = ev->device_name();
  out.arch = ev->arch();
  out.tools = nlohmann::json::parse(version_report(true), nullptr, false);
  out.tools["compiler"] = tc->compiler().toolchain_version();
  return out;
}

}  // namespace kiln::cli
