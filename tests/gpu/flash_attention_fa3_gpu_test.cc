// flash_attention's FlashAttention-3 variant (IMPL 2) on a real GPU (ctest label gpu): a TMA
// producer warpgroup with separate K and V mbarriers, consumer warpgroups with setmaxnreg, with
// and without ping-pong (PING) and persistent longest-first tiles (PERS). Each configuration goes
// through `kiln eval`, which must verify it through all five stages in f16 and bf16: the sweep
// shapes mix causal and unmasked heads with L not a multiple of 128, the edge shapes include
// D = 5 (rows not 16-byte aligned: zero maps, so the producer's plain loads run instead), D = 160
// (the per-row fallback) and L = 1. The timed shape here has 36 tiles: a persistent CTA takes one
// each, a non-persistent grid has one CTA per head and query block. Skips without a Hopper GPU.
#include <gtest/gtest.h>

#ifdef KILN_HAVE_CUDA

#include <string>
#include <tuple>

#include "tests/support/matmul_gpu.h"

namespace kiln {
namespace {

class FlashAttentionFa3 : public testing::HopperMatmulTest,
                          public ::testing::WithParamInterface<std::tuple<int, int>> {};

TEST_P(FlashAttentionFa3, VerifiesWithTmaProducerAndMbarrierRing) {
  const auto [ping, pers] = GetParam();
  testing::TempDir dir;
  nlohmann::json r = testing::eval_verified(
      dir, "flash_attention",
      "IMPL=2,WARPS=8,RM=1,STAGES=2,BN=128,PIPE=1,PING=" + std::to_string(ping) +
          ",PERS=" + std::to_string(pers),
      "B=2,H=3,L=700,D=128,MASK=2");
  // 6 heads x cdiv(700, 128) = 6 query blocks: 36 tiles.
  EXPECT_EQ(testing::grid_x(r), pers ? 36 : 6) << r.dump();
}

INSTANTIATE_TEST_SUITE_P(Schedules, FlashAttentionFa3,
                         ::testing::Values(std::make_tuple(0, 0), std::make_tuple(1, 0),
                                           std::make_tuple(0, 1), std::make_tuple(1, 1)),
                         [](const ::testing::TestParamInfo<std::tuple<int, int>>& i) {
                           return "PING" + std::to_string(std::get<0>(i.param)) + "_PERS" +
                                  std::to_string(std::get<1>(i.param));
                         });

}  // namespace
}  // namespace kiln

#endif  // KILN_HAVE_CUDA
