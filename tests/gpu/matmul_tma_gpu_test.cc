// matmul's TMA variants on a real GPU (ctest label gpu), each through `kiln eval`, which must
// verify it through all five stages; the sweep shapes leave tiles partly outside C, the edge
// shapes have rows that are not 16-byte aligned and so take the cp.async fallback and the
// fragment stores. Skips without a Hopper GPU.
//  - MatmulTmaMulticast: TMA 1 over 2-CTA clusters (CL 1: the pair shares B, CL 2: it shares
//    A): each CTA's producer loads its half of the shared operand once and the TMA engine
//    multicasts it into both CTAs' stages; persistent (PERS 1) or not; two CTAs per pair of tiles.
//  - MatmulTmaStore: PERS 2, persistent CTAs whose epilogue goes through shared memory and TMA
//    stores that overlap the next tile, at each tile size it has; the grid is min(tiles, 132).
#include <gtest/gtest.h>

#ifdef KILN_HAVE_CUDA

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <tuple>

#include "evaluator/cuda/cuda_probe.h"
#include "tests/support/cheat_cases.h"
#include "tests/support/test_env.h"

namespace kiln {
namespace {

class MatmulTmaMulticast : public ::testing::TestWithParam<std::tuple<int, int>> {
 protected:
  void SetUp() override {
    cuda::CudaProbe p = cuda::probe_cuda();
    if (p.gpus.empty() || !p.nvrtc_loaded) {
      GTEST_SKIP() << "no CUDA GPU: " << p.driver_error << p.nvrtc_error;
    }
    if (p.gpus[0].cc_major != 9) GTEST_SKIP() << "the wgmma variant is for sm_90a (Hopper)";
  }
};

TEST_P(MatmulTmaMulticast, VerifiesWithTheSharedOperandMulticastToBothCtas) {
  const auto [cl, pers] = GetParam();
  testing::TempDir dir;
  const std::string out = dir.file("result.json"), log = dir.file("progress.txt");
  // 640 x 768 in tiles of 128 x 256: 5 x 3 = 15 tiles. CL 1 pairs them vertically (3 x 3 pairs),
  // CL 2 horizontally (5 x 2 pairs); either way the last row or column of pairs is half outside
  // C: 18 or 20 CTAs (PERS 1: as many, capped at 66 pairs).
  const std::string cmd = "(" + testing::kiln_binary() +
                          " eval matmul --backend cuda --json --shape M=640,N=768,K=1024"
                          " --cache-dir " +
                          dir.path() + " --targets-dir " + testing::source_root() +
                          "/targets --params BK=64,BM=128,BN=256,GROUP_M=4,IMPL=1,SK=1,STAGES=4,"
                          "WM=1,WN=1,TMA=1,CL=" +
                          std::to_string(cl) + ",PERS=" + std::to_string(pers) + " > " + out +
                          " 2> " + log + ")";
  std::string ignored;
  const int rc = testing::run_command(cmd, &ignored);
  const std::string progress = testing::read_file(log);
  std::ifstream in(out);
  nlohmann::json r = nlohmann::json::parse(in, nullptr, false);
  ASSERT_FALSE(r.is_discarded()) << cmd << "\n" << progress;
  EXPECT_EQ(rc, 0) << progress;
  EXPECT_EQ(r.value("outcome", ""), "verified") << r.value("log", "") << "\n" << progress;
  ASSERT_TRUE(r.contains("geometry") && r["geometry"].contains("grid")) << r.dump();
  const long long grid = r["geometry"]["grid"][0].get<long long>();
  EXPECT_EQ(grid % 2, 0) << "two CTAs per cluster: " << r["geometry"].dump();
  EXPECT_EQ(grid, cl == 1 ? 18 : 20) << r["geometry"].dump();
  EXPECT_GT(r["timing"].value("median_us", 0.0), 0.0);
}

INSTANTIATE_TEST_SUITE_P(Clusters, MatmulTmaMulticast,
                         ::testing::Values(std::make_tuple(1, 0), std::make_tuple(2, 0),
                                           std::make_tuple(1, 1), std::make_tuple(2, 1)),
                         [](const ::testing::TestParamInfo<std::tuple<int, int>>& i) {
                           return "CL" + std::to_string(std::get<0>(i.param)) + "_PERS" +
                                  std::to_string(std::get<1>(i.param));
                         });

class MatmulTmaStore : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    cuda::CudaProbe p = cuda::probe_cuda();
    if (p.gpus.empty() || !p.nvrtc_loaded) {
      GTEST_SKIP() << "no CUDA GPU: " << p.driver_error << p.nvrtc_error;
    }
    if (p.gpus[0].cc_major != 9) GTEST_SKIP() << "the wgmma variant is for sm_90a (Hopper)";
  }
};

TEST_P(MatmulTmaStore, VerifiesPersistentWithTheEpilogueThroughTmaStores) {
  testing::TempDir dir;
  const std::string out = dir.file("result.json"), log = dir.file("progress.txt");
  // 640 x 768: 5 x 3 = 15 tiles of 128 x 256, 3 x 6 = 18 of 256 x 128 (the last row of them half
  // outside C), 5 x 4 = 20 of 128 x 192 or 5 x 6 = 30 of 128 x 128, so a grid of as many
  // persistent CTAs.
  const std::string tile = GetParam();
  const std::string cmd = "(" + testing::kiln_binary() +
                          " eval matmul --backend cuda --json --shape M=640,N=768,K=1024"
                          " --cache-dir " +
                          dir.path() + " --targets-dir " + testing::source_root() +
                          "/targets --params BK=64,GROUP_M=4,IMPL=1,SK=1,WM=1,WN=1,"
                          "TMA=1,CL=0,PERS=2," +
                          tile + " > " + out + " 2> " + log + ")";
  std::string ignored;
  const int rc = testing::run_command(cmd, &ignored);
  const std::string progress = testing::read_file(log);
  std::ifstream in(out);
  nlohmann::json r = nlohmann::json::parse(in, nullptr, false);
  ASSERT_FALSE(r.is_discarded()) << cmd << "\n" << progress;
  EXPECT_EQ(rc, 0) << progress;
  EXPECT_EQ(r.value("outcome", ""), "verified") << r.value("log", "") << "\n" << progress;
  ASSERT_TRUE(r.contains("geometry") && r["geometry"].contains("grid")) << r.dump();
  const long long tiles = tile.find("BM=256") != std::string::npos   ? 18
                          : tile.find("BN=256") != std::string::npos ? 15
                          : tile.find("BN=192") != std::string::npos ? 20
                                                                     : 30;
  EXPECT_EQ(r["geometry"]["grid"][0].get<long long>(), tiles) << r["geometry"].dump();
  EXPECT_GT(r["timing"].value("median_us", 0.0), 0.0);
}

INSTANTIATE_TEST_SUITE_P(Tiles, MatmulTmaStore,
                         ::testing::Values("BM=128,BN=256,STAGES=4", "BM=256,BN=128,STAGES=4",
                                           "BM=128,BN=192,STAGES=4", "BM=128,BN=128,STAGES=6"),
                         [](const ::testing::TestParamInfo<const char*>& i) {
                           const std::string p = i.param;
                           return "Tile" + p.substr(3, 3) + "x" + p.substr(10, 3);
                         });

}  // namespace
}  // namespace kiln

#else

TEST(MatmulTmaMulticast, NeedsCudaHeaders) {
  GTEST_SKIP() << "no CUDA GPU: built without CUDA headers";
}

#endif
