// Every built-in target's seed and template (first valid configuration) passes the static scan
// and compiles in every dtype the target declares, on every backend: CUDA with NVRTC for sm_90a
// (no GPU needed), cpu with the system compiler, Triton with its compile worker for sm_90a. The
// compilers scan what they compile (the PTX, the preprocessed source), so this also proves that no
// built-in kernel trips those scans.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>

#include "cli/sweep.h"
#include "evaluator/cpu/cpu_compiler.h"
#include "evaluator/cuda/nvrtc_compiler.h"
#include "evaluator/evaluation.h"
#include "evaluator/source_scan.h"
#include "evaluator/triton/triton_compiler.h"
#include "shared/target_spec.h"
#include "tests/support/test_env.h"

namespace kiln::eval {
namespace {

// Compiles the seed and the template of every target that has `backend`, in each of its dtypes,
// and returns how many compiles were made; every one must pass the scan and compile.
int compile_built_in_targets(Compiler& compiler, const std::string& backend,
                             const std::string& arch) {
  Result<std::vector<TargetSpec>> targets = load_targets(testing::builtin_targets_dir());
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
        CandidateSpec c = candidate_of(*k, "", k->defines);
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

// The parameters that switch a template between code paths (structural variants, pipelines,
// schedules) rather than sizing one: each value of each, in the first configuration that meets
// the constraints with it, compiles -- in every dtype for the variant switches (IMPL, ARCH: their
// inline PTX differs by element type), in the first dtype for the rest, to keep CI quick. The test
// above compiles only the first configuration, which would leave flash_attention's IMPL 1 and 2,
// say, to the GPU suite.
TEST(BuiltInTargets, EveryCudaCodePathOfTheTemplatesCompiles) {
  Result<std::unique_ptr<cuda::NvrtcCompiler>> nvrtc = cuda::NvrtcCompiler::load();
  if (!nvrtc.is_ok()) GTEST_SKIP() << "no NVRTC: " << nvrtc.status().message();
  const std::set<std::string> switches = {"IMPL", "ARCH", "TMA", "PERS", "PING",
                                          "PIPE", "CL",   "SK",  "WIDE"};
  Result<std::vector<TargetSpec>> targets = load_targets(testing::builtin_targets_dir());
  ASSERT_TRUE(targets.is_ok()) << targets.status().to_string();
  int compiled = 0;
  for (const TargetSpec& t : *targets) {
    const BackendSpec* b = t.backend("cuda");
    if (!b || !b->tunable) continue;
    const KernelSpec& k = *b->tunable;
    std::map<std::map<std::string, std::string>, bool> chosen;  // -> in every dtype
    for (const auto& [name, values] : k.space) {
      if (!switches.count(name)) continue;
      for (const auto& value : values) {
        const std::string v = std::to_string(value);
        std::map<std::string, std::string> first;
        for_each_config(k, t.benchmark_for("cuda"), b->dtypes.front(), [&](const auto& p) {
          if (p.at(name) != v) return true;
          first = p;
          return false;
        });
        EXPECT_FALSE(first.empty()) << t.name << ": no configuration has " << name << "=" << v;
        if (!first.empty()) chosen[first] |= name == "IMPL" || name == "ARCH";
      }
    }
    for (const auto& [params, every_dtype] : chosen) {
      for (DType d : b->dtypes) {
        if (d != b->dtypes.front() && !every_dtype) continue;
        CandidateSpec c = candidate_of(k, "", k.defines);
        for (const auto& [name, value] : params) c.params[name] = value;
        Result<CompileRequest> req = build_compile_request(t, "cuda", "sm_90a", c, d);
        ASSERT_TRUE(req.is_ok()) << t.name << ": " << req.status().to_string();
        CompileOutput out = (*nvrtc)->compile(*req);
        EXPECT_TRUE(out.ok) << t.name << " " << cli::format_params(params) << " " << dtype_name(d)
                            << ":\n"
                            << out.log;
        ++compiled;
      }
    }
  }
  EXPECT_GE(compiled, 20);
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
