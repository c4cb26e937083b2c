// `kiln eval --profile` on a real GPU (ctest label gpu): the profile of the rmsnorm seed, the best
// known rmsnorm and matmul configurations at the benchmark shape must be plausible -- registers
// from the function attributes, and where CUPTI counters are permitted, DRAM throughput near the
// ceiling for the best memory-bound kernel and busy SMs for the tensor-core matmul. Where counters
// are not permitted the result must carry the one notice with the fix. Skips without a GPU.
#include <gtest/gtest.h>

#ifdef KILN_HAVE_CUDA

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "evaluator/cuda/cuda_probe.h"
#include "tests/support/cheat_cases.h"
#include "tests/support/test_env.h"

namespace kiln {
namespace {

class ProfileGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    cuda::CudaProbe p = cuda::probe_cuda();
    if (p.gpus.empty() || !p.nvrtc_loaded) {
      GTEST_SKIP() << "no CUDA GPU: " << p.driver_error << p.nvrtc_error;
    }
  }

  // `kiln eval <args> --profile --json` -> the result JSON (or null, with the output in a failure).
  nlohmann::json eval(const std::string& args) {
    static testing::TempDir cache;  // ceilings are measured once for the whole suite
    testing::TempDir dir;
    const std::string out = dir.file("result.json");
    // In a subshell: run_command sends the command's stderr to its own capture, which must not
    // override these redirections (the JSON alone goes to `out`).
    const std::string cmd = "(" + testing::kiln_binary() + " eval " + args +
                            " --backend cuda --profile --json --cache-dir " + cache.path() +
                            " --targets-dir " + testing::source_root() + "/targets > " + out +
                            " 2> " + dir.file("progress.txt") + ")";
    std::string ignored;
    const int rc = testing::run_command(cmd, &ignored);
    std::ifstream in(out);
    nlohmann::json r = nlohmann::json::parse(in, nullptr, false);
    std::ifstream progress(dir.file("progress.txt"));
    std::stringstream ss;
    ss << progress.rdbuf();
    progress_ = ss.str();
    EXPECT_EQ(rc, 0) << cmd << "\n" << progress_;
    return r.is_discarded() ? nlohmann::json() : r;
  }

  static double metric(const nlohmann::json& r, const std::string& key) {
    return r["metrics"].value("prof." + key, -1.0);
  }
  static bool has_counters(const nlohmann::json& r) {
    return r["metrics"].contains("prof.dram_throughput_pct");
  }

  std::string progress_;
};

TEST_F(ProfileGpu, RmsnormSeedAndBestHavePlausibleProfiles) {
  nlohmann::json seed = eval("rmsnorm");
  ASSERT_TRUE(seed.is_object()) << progress_;
  ASSERT_EQ(seed["outcome"], "verified") << progress_;
  EXPECT_GT(metric(seed, "registers"), 0) << seed.dump(2);
  EXPECT_GE(metric(seed, "local_bytes"), 0);
  EXPECT_GT(metric(seed, "theoretical_occupancy_pct"), 0);
  EXPECT_NE(seed["bottleneck"].get<std::string>().find("memory"), std::string::npos)
      << seed["profile_note"];

  // The best known configuration (bench/results/2026-11-22-H100-targets.md: 97.6% of the floor).
  nlohmann::json best = eval("rmsnorm --params BLOCK=256,ELEMS=32,HINT=0,ROWS=1,WREG=0");
  ASSERT_TRUE(best.is_object()) << progress_;
  ASSERT_EQ(best["outcome"], "verified") << progress_;
  EXPECT_GT(metric(best, "registers"), 0);
  EXPECT_EQ(best["bottleneck"], "memory_near_peak") << best["profile_note"];
  if (!has_counters(best)) {
    EXPECT_NE(best["profile_note"].get<std::string>().find("notice: "), std::string::npos);
    GTEST_SKIP() << "counters not available, so only attributes were checked: "
                 << best["profile_note"];
  }
  const double dram = metric(best, "dram_throughput_pct");
  EXPECT_GT(dram, 50) << best.dump(2);
  EXPECT_LE(dram, 101);
  EXPECT_GT(metric(best, "achieved_occupancy_pct"), 0);
  EXPECT_GT(dram, metric(seed, "dram_throughput_pct"))
      << "the best moves bytes faster than the seed";
  // Bytes the counters saw against what the target says the kernel must move (2*M*N+N halves).
  const double bytes = best["metrics"].value("bytes", 0.0);
  EXPECT_GT(metric(best, "dram_bytes"), 0.7 * bytes);  // L2 may hold a little; writes may linger
  EXPECT_LT(metric(best, "dram_bytes"), 1.5 * bytes);
}

TEST_F(ProfileGpu, TensorCoreMatmulIsComputeBound) {
  nlohmann::json best =
      eval("matmul --params BK=64,BM=128,BN=256,CL=0,GROUP_M=8,IMPL=1,PERS=0,STAGES=4,WM=1,WN=1");
  ASSERT_TRUE(best.is_object()) << progress_;
  ASSERT_EQ(best["outcome"], "verified") << progress_;
  EXPECT_GT(metric(best, "registers"), 0);
  EXPECT_GT(metric(best, "dynamic_shared_bytes"), 48 * 1024);
  EXPECT_EQ(metric(best, "local_bytes"), 0);
  EXPECT_EQ(best["bottleneck"], "compute") << best["profile_note"];
  if (!has_counters(best)) GTEST_SKIP() << "counters not available: " << best["profile_note"];
  EXPECT_GT(metric(best, "sm_throughput_pct"), 50) << best.dump(2);
  EXPECT_LT(metric(best, "dram_throughput_pct"), metric(best, "sm_throughput_pct"));
}

}  // namespace
}  // namespace kiln

#else
TEST(ProfileGpu, NeedsCudaHeaders) { GTEST_SKIP() << "no CUDA GPU: built without CUDA headers"; }
#endif
