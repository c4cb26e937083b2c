// matmul's split-K configurations (SK 2, 3, 4, 8: a cluster of SK CTAs per tile, the partial tiles
// summed through distributed shared memory) on a real GPU (ctest label gpu): `kiln eval` must
// verify each one through all five stages -- the edge shapes give some CTAs of a cluster no K
// slice at all (K = 1 against 8 ranks), the sweep shapes rows that are not 16-byte aligned -- and
// the determinism stage must find the reduction bitwise repeatable. The launch must really be SK
// CTAs per tile. Skips without a GPU.
#include <gtest/gtest.h>

#ifdef KILN_HAVE_CUDA

#include <string>

#include "tests/support/matmul_gpu.h"

namespace kiln {
namespace {

class MatmulSplitK : public testing::HopperMatmulTest, public ::testing::WithParamInterface<int> {};

TEST_P(MatmulSplitK, VerifiesDeterministicallyWithSkCtasPerTile) {
  const int sk = GetParam();
  testing::TempDir dir;
  // 128 tokens against a 1024-wide layer: 8 tiles of 128 x 128, so 8 * SK CTAs.
  nlohmann::json r = testing::eval_matmul_verified(
      dir,
      "BK=64,BM=128,BN=128,CL=0,GROUP_M=1,IMPL=1,PERS=0,STAGES=6,WM=1,WN=1,SK=" +
          std::to_string(sk),
      "M=128,N=1024,K=4096");
  EXPECT_EQ(testing::grid_x(r), 8LL * sk) << r.dump();
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
