// `kiln profile` on a real GPU (ctest label gpu): profiles `kiln eval rmsnorm --no-time`, whose
// kernels run in a sandbox child process that kiln kills when it is done (so the child never runs
// its atexit handler): the records must come from the injection library's flushes at
// synchronisations, in the child's own trace file. Skips without a usable GPU or without
// libkiln_inject.so.
#include <gtest/gtest.h>

#ifdef KILN_HAVE_CUDA

#include <filesystem>
#include <string>

#include "evaluator/cuda/cuda_probe.h"
#include "evaluator/profile/plan.h"
#include "evaluator/profile/trace.h"
#include "tests/support/cheat_cases.h"
#include "tests/support/test_env.h"

namespace kiln {
namespace {

TEST(ProfileProgramGpu, RecordsTheRmsnormKernelsOfKilnEvalsSandboxChild) {
  cuda::CudaProbe p = cuda::probe_cuda();
  if (p.gpus.empty() || !p.nvrtc_loaded) GTEST_SKIP() << "no CUDA GPU: " << p.driver_error << p.nvrtc_error;
  const std::filesystem::path inject =
      std::filesystem::path(testing::kiln_binary()).parent_path() / ".." / "lib" / "libkiln_inject.so";
  if (!std::filesystem::exists(inject)) GTEST_SKIP() << "no " << inject << " (built without CUPTI)";

  testing::TempDir dir;
  const std::string traces = dir.file("traces"), plan_path = dir.file("plan.json");
  std::string output;
  const std::string cmd = testing::kiln_binary() + " profile --keep-traces " + traces + " --out " +
                          plan_path + " -- " + testing::kiln_binary() +
                          " eval rmsnorm --backend cuda --no-time --cache-dir " + dir.file("cache") +
                          " --targets-dir " + testing::source_root() + "/targets 2>&1";
  ASSERT_EQ(testing::run_command(cmd, &output), 0) << output;

  Result<profile::TraceSet> set = profile::read_trace_dir(traces);
  ASSERT_TRUE(set.is_ok()) << set.status().to_string();
  // At least the sandbox child wrote a file (kiln eval itself does too where it initialises CUDA).
  EXPECT_GE(set->processes.size(), 1u) << output;
  size_t rmsnorm_launches = 0;
  for (const profile::KernelRecord& k : set->kernels) {
    if (k.name.find("rmsnorm") != std::string::npos) {
      ++rmsnorm_launches;
      EXPECT_GT(k.duration_ns(), 0u) << k.name;
      EXPECT_GT(k.grid[0] * k.block[0], 0) << k.name;
    }
  }
  EXPECT_GT(rmsnorm_launches, 0u) << output;

  Result<profile::Plan> plan = profile::load_plan(plan_path);
  ASSERT_TRUE(plan.is_ok()) << plan.status().to_string() << "\n" << output;
  std::map<std::string, double> weights = profile::target_weights(*plan);
  EXPECT_GT(weights["rmsnorm"], 0.0) << output;
  EXPECT_NE(output.find("rmsnorm"), std::string::npos) << output;
}

}  // namespace
}  // namespace kiln

#else

TEST(ProfileProgramGpu, NeedsCudaHeaders) { GTEST_SKIP() << "no CUDA GPU: built without CUDA headers"; }

#endif
