// matmul's split-K configurations (SK 2, 3, 4, 8: a cluster of SK CTAs per tile, the partial tiles
// summed through distributed shared memory) on a real GPU (ctest label gpu): `kiln eval` must
// verify each one through all five stages -- the edge shapes give some CTAs of a cluster no K
// slice at all (K = 1 against 8 ranks), the sweep shapes rows that are not 16-byte aligned -- and
// the determinism stage must find the reduction bitwise repeatable. The launch must really be SK
// CTAs per tile. Skips without a GPU.
#include <gtest/gtest.h>

#ifdef KILN_HAVE_CUDA

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "evaluator/cuda/cuda_probe.h"
#include "tests/support/cheat_cases.h"
#include "tests/support/test_env.h"

namespace kiln {
namespace {

class MatmulSplitK : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    cuda::CudaProbe p = cuda::probe_cuda();
    if (p.gpus.empty() || !p.nvrtc_loaded) {
      GTEST_SKIP() << "no CUDA GPU: " << p.driver_error << p.nvrtc_error;
    }
    if (p.gpus[0].cc_major != 9) GTEST_SKIP() << "the wgmma variant is for sm_90a (Hopper)";
  }
};

TEST_P(MatmulSplitK, VerifiesDeterministicallyWithSkCtasPerTile) {
  const int sk = GetParam();
  testing::TempDir dir;
  const std::string out = dir.file("result.json"), log = dir.file("progress.txt");
  // 128 tokens against a 1024-wide layer: 8 tiles of 128 x 128, so 8 * SK CTAs.
  const std::string cmd =
      "(" + testing::kiln_binary() +
      " eval matmul --backend cuda --json --shape M=128,N=1024,K=4096 --cache-dir " + dir.path() +
      " --targets-dir " + testing::source_root() +
      "/targets --params BK=64,BM=128,BN=128,CL=0,GROUP_M=1,IMPL=1,PERS=0,STAGES=6,WM=1,WN=1,SK=" +
      std::to_string(sk) + " > " + out + " 2> " + log + ")";
  std::string ignored;
  const int rc = testing::run_command(cmd, &ignored);
  const std::string progress = testing::read_file(log);
  std::ifstream in(out);
  nlohmann::json r = nlohmann::json::parse(in, nullptr, false);
  ASSERT_FALSE(r.is_discarded()) << cmd << "\n" << progress;
  EXPECT_EQ(rc, 0) << progress;
  EXPECT_EQ(r.value("outcome", ""), "verified") << r.value("log", "") << "\n" << progress;
  ASSERT_TRUE(r.contains("geometry") && r["geometry"].contains("grid")) << r.dump();
  EXPECT_EQ(r["geometry"]["grid"][0].get<long long>(), 8LL * sk) << r["geometry"].dump();
  EXPECT_GT(r["timing"].value("median_us", 0.0), 0.0);
}

INSTANTIATE_TEST_SUITE_P(ClusterSizes, MatmulSplitK, ::testing::Values(2, 3, 4, 8),
                         [](const ::testing::TestParamInfo<int>& i) {
                           return "SK" + std::to_string(i.param);
                         });

}  // namespace
}  // namespace kiln

#else

TEST(MatmulSplitK, NeedsCudaHeaders) { GTEST_SKIP() << "no CUDA GPU: built without CUDA headers"; }

#endif
