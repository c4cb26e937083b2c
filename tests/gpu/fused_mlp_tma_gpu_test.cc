// fused_mlp's TMA variant on a real GPU (ctest label gpu): ARCH 2 with one producer thread that
// fills the ring with TMA boxes of x, w1, w3 (phase 1) and h, w2 (phase 2, h written by other
// blocks with ordinary stores a moment before), and consumer warpgroups whose y tiles leave
// through shared memory and TMA stores. Each configuration goes through `kiln eval`, which must
// verify it through all five stages in f16 and bf16: the sweep shapes leave tiles partly outside
// the matrices, the edge shapes have rows that are not 16-byte aligned (zero maps: the cp.async
// producer and register stores run instead) or fewer than 3 rows (one block does every tile).
// The timed shape has 3 row blocks, so phase-2 tiles wait for h written by other blocks. HTMA 1
// writes h through TMA stores too and counts each warpgroup's half of a tile late, during its
// next tile: the rows still verify, and no block waits forever on a count held back.
// Skips without a Hopper GPU.
#include <gtest/gtest.h>

#ifdef KILN_HAVE_CUDA

#include <string>
#include <tuple>

#include "tests/support/matmul_gpu.h"

namespace kiln {
namespace {

class FusedMlpTma : public testing::HopperMatmulTest,
                    public ::testing::WithParamInterface<std::tuple<int, int, int>> {};

TEST_P(FusedMlpTma, VerifiesWithTmaLoadsOfHWrittenByOtherBlocksAndTmaStoresOfY) {
  const auto [stages, ng, htma] = GetParam();
  testing::TempDir dir;
  nlohmann::json r = testing::eval_verified(
      dir, "fused_mlp",
      "ARCH=2,BN=256,WG=2,GRID=132,WIDE=1,TMA=1,STAGES=" + std::to_string(stages) +
          ",NG=" + std::to_string(ng) + ",HTMA=" + std::to_string(htma),
      "M=384,D=1024,H=2816");
  EXPECT_EQ(testing::grid_x(r), 132) << r.dump();
}

INSTANTIATE_TEST_SUITE_P(Pipelines, FusedMlpTma,
                         ::testing::Values(std::make_tuple(4, 2, 0), std::make_tuple(4, 1, 0),
                                           std::make_tuple(3, 2, 0), std::make_tuple(4, 1, 1),
                                           std::make_tuple(3, 2, 1)),
                         [](const ::testing::TestParamInfo<std::tuple<int, int, int>>& i) {
                           return "STAGES" + std::to_string(std::get<0>(i.param)) + "_NG" +
                                  std::to_string(std::get<1>(i.param)) + "_HTMA" +
                                  std::to_string(std::get<2>(i.param));
                         });

}  // namespace
}  // namespace kiln

#endif  // KILN_HAVE_CUDA
