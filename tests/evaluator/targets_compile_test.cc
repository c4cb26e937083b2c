// Every built-in target's seed and template (first valid configuration) passes the static scan
// and compiles in every dtype the target declares, on every backend: CUDA with NVRTC for sm_90a
// (no GPU needed), cpu with the system compiler, Triton with its compile worker for sm_90a. The
// compilers scan what they compile (the PTX, the preprocessed source), so this also proves that no
// built-in kernel trips those scans.
#include <gtest/gtest.h>

#include "evaluator/cpu/cpu_compiler.h"
#include "evaluator/cuda/nvrtc_compiler.h"
#include "evaluator/evaluation.h"
#include "evaluator/source_scan.h"
#include "evaluator/triton/triton_compiler.h"
#include "shared/target_spec.h"

namespace kiln::eval {
namespace {

// Compiles the seed and the template of every target that has `backend`, in each of its dtypes,
// and returns how many compiles were made; every one must pass the scan and compile.
int compile_built_in_targets(Compiler& compiler, const std::string& backend,
                             const std::string& arch) {
  Result<std::vector<TargetSpec>> targets = load_targets(std::string(KILN_SOURCE_DIR) + "/targets");
  EXPECT_TRUE(targets.is_ok()) << targets.status().to_string();
  if (!targets.is_ok()) return 0;
  int compiled = 0;
  for (const TargetSpec& t : *targets) {
    const BackendSpec* b = t.backend(backend);
    if (!b) continue;
    for (const KernelSpec* k : {&b->seed, b->tunable ? &*b->tunable : nullptr}) {
      if (!k) continue;
      std::vector<ScanFinding> findings = scan_source(k->source, backend);
      EXPECT_TRUE(findings.empty())
          << t.name << " " << k->source_file << ": " << refusal_log("scan", findings);
      for (DType d : b->dtypes) {
        CandidateSpec c;
        c.source = k->source;
        c.kernel_name = k->kernel_name;
        c.params = k->defines;
        c.geometry = k;
        if (k != &b->seed) {
          std::map<std::string, std::string> params;  // the first that meets the constraints
          for_each_config(*k, t.benchmark_for(backend), d, [&](const auto& p) {
            params = p;
            return false;
          });
          EXPECT_FALSE(params.empty())
              << t.name << ": no template configuration meets the constraints";
          for (const auto& [name, value] : params) c.params[name] = value;
        }
        Result<CompileRequest> req = build_compile_request(t, backend, arch, c, d);
        EXPECT_TRUE(req.is_ok()) << t.name << ": " << req.status().to_string();
        if (!req.is_ok()) continue;
        CompileOutput out = compiler.compile(*req);
        EXPECT_TRUE(out.ok) << t.name << " " << k->source_file << " " << dtype_name(d) << ":\n"
                            << out.log;
        ++compiled;
      }
    }
  }
  return compiled;
}

TEST(BuiltInTargets, CudaSeedsAndTemplatesCompileForEveryDtype) {
  Result<std::unique_ptr<cuda::NvrtcCompiler>> nvrtc = cuda::NvrtcCompiler::load();
  if (!nvrtc.is_ok()) GTEST_SKIP() << "no NVRTC: " << nvrtc.status().message();
  EXPECT_GE(compile_built_in_targets(**nvrtc, "cuda", "sm_90a"), 6);
}

TEST(BuiltInTargets, CpuSeedsAndTemplatesCompileForEveryDtype) {
  Result<std::unique_ptr<CpuCompiler>> cpu = CpuCompiler::create();
  ASSERT_TRUE(cpu.is_ok()) << cpu.status().to_string();
  EXPECT_GE(compile_built_in_targets(**cpu, "cpu", "cpu"), 9);
}

TEST(BuiltInTargets, TritonSeedsAndTemplatesCompileForEveryDtype) {
  Result<std::unique_ptr<TritonCompiler>> triton = TritonCompiler::create();
  ASSERT_TRUE(triton.is_ok()) << triton.status().to_string();
  EXPECT_GE(compile_built_in_targets(**triton, "triton", "sm_90a"), 6);
}

}  // namespace
}  // namespace kiln::eval
