// Every built-in target's CUDA seed and template (first valid configuration) compiles with NVRTC for
// sm_90a in every dtype the target declares: catches kernel-text mistakes in CI, without a GPU.
#include <gtest/gtest.h>

#include "evaluator/cuda/nvrtc_compiler.h"
#include "evaluator/evaluation.h"
#include "evaluator/prelude.h"
#include "shared/target_spec.h"

namespace kiln::eval {
namespace {

TEST(BuiltInTargets, CudaSeedsAndTemplatesCompileForEveryDtype) {
  Result<std::unique_ptr<cuda::NvrtcCompiler>> nvrtc = cuda::NvrtcCompiler::load();
  if (!nvrtc.is_ok()) GTEST_SKIP() << "no NVRTC: " << nvrtc.status().message();
  Result<std::vector<TargetSpec>> targets = load_targets(std::string(KILN_SOURCE_DIR) + "/targets");
  ASSERT_TRUE(targets.is_ok()) << targets.status().to_string();
  int compiled = 0;
  for (const TargetSpec& t : *targets) {
    const BackendSpec* b = t.backend("cuda");
    if (!b) continue;
    for (const KernelSpec* k : {&b->seed, b->tunable ? &*b->tunable : nullptr}) {
      if (!k) continue;
      for (DType d : b->dtypes) {
        CompileRequest req;
        req.source = with_prelude("cuda", k->source);
        req.kernel_name = k->kernel_name;
        req.defines = k->defines;
        if (k != &b->seed) {
          std::map<std::string, std::string> params;  // the first that meets the constraints
          for_each_config(*k, t.benchmark, d, [&](const auto& p) {
            params = p;
            return false;
          });
          ASSERT_FALSE(params.empty()) << t.name << ": no template configuration meets the constraints";
          for (const auto& [name, value] : params) req.defines[name] = value;
        }
        req.defines["KILN_DTYPE"] = *dtype_macro("cuda", d);
        req.arch = "sm_90a";
        CompileOutput out = (*nvrtc)->compile(req);
        EXPECT_TRUE(out.ok) << t.name << " " << k->source_file << " " << dtype_name(d) << ":\n" << out.log;
        ++compiled;
      }
    }
  }
  EXPECT_GE(compiled, 6);
}

}  // namespace
}  // namespace kiln::eval
