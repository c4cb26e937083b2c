// Every built-in target's CUDA seed and template (first valid configuration) compiles with NVRTC for
// sm_90a in every dtype the target declares: catches kernel-text mistakes in CI, without a GPU.
#include <gtest/gtest.h>

#include "evaluator/cuda/nvrtc_compiler.h"
#include "evaluator/evaluation.h"
#include "evaluator/prelude.h"
#include "shared/target_spec.h"

namespace kiln::eval {
namespace {

// The first configuration (in the order of the space's values, last parameter fastest) that
// meets the template's constraints at `shape`; empty when none does.
std::map<std::string, std::string> first_valid_config(const KernelSpec& k, const Shape& shape, DType d) {
  std::vector<std::pair<std::string, const std::vector<int64_t>*>> axes;
  for (const auto& [name, values] : k.space) axes.push_back({name, &values});
  std::vector<size_t> at(axes.size(), 0);
  while (true) {
    std::map<std::string, std::string> params = k.defines;
    for (size_t i = 0; i < axes.size(); ++i) params[axes[i].first] = std::to_string((*axes[i].second)[at[i]]);
    Result<bool> ok = satisfies_constraints(k, shape, d, params);
    if (ok.is_ok() && *ok) return params;
    size_t i = axes.size();
    while (i > 0 && ++at[i - 1] == axes[i - 1].second->size()) at[--i] = 0;
    if (i == 0) return {};
  }
}

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
          std::map<std::string, std::string> params = first_valid_config(*k, t.benchmark, d);
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
