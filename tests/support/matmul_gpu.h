// What the GPU tests of the wgmma templates (tests/gpu/matmul_*_gpu_test.cc,
// fused_mlp_tma_gpu_test.cc) share: whether this machine can run the wgmma variants, and
// `kiln eval` of one configuration at one shape with its verdict.
#pragma once

#ifdef KILN_HAVE_CUDA

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "evaluator/cuda/cuda_probe.h"
#include "tests/support/cheat_cases.h"
#include "tests/support/test_env.h"

namespace kiln::testing {

// Skips the test unless GPU 0 is a Hopper (sm_90) that NVRTC can compile for.
class HopperMatmulTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cuda::CudaProbe p = cuda::probe_cuda();
    if (p.gpus.empty() || !p.nvrtc_loaded) {
      GTEST_SKIP() << "no CUDA GPU: " << p.driver_error << p.nvrtc_error;
    }
    if (p.gpus[0].cc_major != 9) GTEST_SKIP() << "the wgmma variant is for sm_90a (Hopper)";
  }
};

// `kiln eval TARGET --params PARAMS --shape SHAPE --json` on the GPU, in `dir` (its compile
// cache too); the result JSON, which must say "verified" with a timing (checked here), and the
// launch geometry it reports.
inline nlohmann::json eval_verified(const TempDir& dir, const std::string& target,
                                    const std::string& params, const std::string& shape) {
  const std::string out = dir.file("result.json"), log = dir.file("progress.txt");
  // In a subshell: run_command captures stderr itself, which must not override these redirections.
  const std::string cmd = "(" + kiln_binary() + " eval " + target +
                          " --backend cuda --json --shape " + shape + " --cache-dir " + dir.path() +
                          " --targets-dir " + source_root() + "/targets --params " + params +
                          " > " + out + " 2> " + log + ")";
  std::string ignored;
  const int rc = run_command(cmd, &ignored);
  const std::string progress = read_file(log);
  nlohmann::json r = nlohmann::json::parse(read_file(out), nullptr, false);
  EXPECT_FALSE(r.is_discarded()) << cmd << "\n" << progress;
  if (r.is_discarded()) return nlohmann::json::object();
  EXPECT_EQ(rc, 0) << progress;
  EXPECT_EQ(r.value("outcome", ""), "verified") << r.value("log", "") << "\n" << progress;
  EXPECT_TRUE(r.contains("geometry") && r["geometry"].contains("grid")) << r.dump();
  EXPECT_GT(r.value("timing", nlohmann::json::object()).value("median_us", 0.0), 0.0);
  return r;
}

inline nlohmann::json eval_matmul_verified(const TempDir& dir, const std::string& params,
                                           const std::string& shape) {
  return eval_verified(dir, "matmul", params, shape);
}

// The grid's x size the evaluation reports (-1 when it reports none).
inline long long grid_x(const nlohmann::json& r) {
  if (!r.contains("geometry") || !r["geometry"].contains("grid")) return -1;
  return r["geometry"]["grid"][0].get<long long>();
}

}  // namespace kiln::testing

#endif  // KILN_HAVE_CUDA
