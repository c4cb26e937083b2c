// matmul's TMA variants on a real GPU (ctest label gpu), each through `kiln eval`, which must
// verify it through all five stages; the sweep shapes leave tiles partly outside C, the edge
// shapes have rows that are not 16-byte aligned and so take the cp.async fallback and the
// fragment stores. Skips without a Hopper GPU.
//  - MatmulTmaMulticast: TMA 1 over 2-CTA clusters (CL 1: the pair shares B, CL 2: it shares
//    A): each CTA's producer loads its half of the shared operand once and the TMA engine
//    multicasts it into both CTAs' stages; persistent (PERS 1) or not; two CTAs per pair of tiles.
//  - MatmulTmaStore: PERS 2, persistent CTAs whose epilogue goes through shared memory and TMA
//    stores that overlap the next tile, at each tile size it has; the grid is min(tiles, 132).
//  - MatmulPingPong: PERS 3, the same with each consumer warpgroup owning every other tile of
//    its CTA, at a shape with more tiles than CTAs (2 or 3 per CTA, so both warpgroups work and
//    hand the tensor cores over), whose last row and column of tiles are partly outside C.
//  - MatmulStreamK: PERS 4, PERS 2 with the last partial wave's K slices split over all 132
//    CTAs, partial tiles passed through the scratch buffer: ranges of one slice or none (each
//    tile's owner adds eight partials), ranges that cross from one tile into the next, and a
//    shape whose partials would not fit in the scratch buffer (every tile whole).
#include <gtest/gtest.h>

#ifdef KILN_HAVE_CUDA

#include <ostream>
#include <string>
#include <tuple>

#include "tests/support/matmul_gpu.h"

namespace kiln {
namespace {

class MatmulTmaMulticast : public testing::HopperMatmulTest,
                           public ::testing::WithParamInterface<std::tuple<int, int>> {};

TEST_P(MatmulTmaMulticast, VerifiesWithTheSharedOperandMulticastToBothCtas) {
  const auto [cl, pers] = GetParam();
  testing::TempDir dir;
  // 640 x 768 in tiles of 128 x 256: 5 x 3 = 15 tiles. CL 1 pairs them vertically (3 x 3 pairs),
  // CL 2 horizontally (5 x 2 pairs); either way the last row or column of pairs is half outside
  // C: 18 or 20 CTAs (PERS 1: as many, capped at 66 pairs).
  nlohmann::json r = testing::eval_matmul_verified(
      dir,
      "BK=64,BM=128,BN=256,GROUP_M=4,IMPL=1,SK=1,STAGES=4,WM=1,WN=1,TMA=1,CL=" +
          std::to_string(cl) + ",PERS=" + std::to_string(pers),
      "M=640,N=768,K=1024");
  const long long grid = testing::grid_x(r);
  EXPECT_EQ(grid % 2, 0) << "two CTAs per cluster: " << r.dump();
  EXPECT_EQ(grid, cl == 1 ? 18 : 20) << r.dump();
}

INSTANTIATE_TEST_SUITE_P(Clusters, MatmulTmaMulticast,
                         ::testing::Values(std::make_tuple(1, 0), std::make_tuple(2, 0),
                                           std::make_tuple(1, 1), std::make_tuple(2, 1)),
                         [](const ::testing::TestParamInfo<std::tuple<int, int>>& i) {
                           return "CL" + std::to_string(std::get<0>(i.param)) + "_PERS" +
                                  std::to_string(std::get<1>(i.param));
                         });

// A PERS 2 tile size and the tiles it cuts 640 x 768 into: 5 x 3 = 15 of 128 x 256, 3 x 6 = 18 of
// 256 x 128 (the last row of them half outside C), 5 x 4 = 20 of 128 x 192, 5 x 6 = 30 of
// 128 x 128; the grid is as many persistent CTAs.
struct StoreTile {
  const char* params;
  long long tiles;
};
void PrintTo(const StoreTile& t, std::ostream* os) {
  *os << t.params << ": " << t.tiles << " tiles";
}

class MatmulTmaStore : public testing::HopperMatmulTest,
                       public ::testing::WithParamInterface<StoreTile> {};

TEST_P(MatmulTmaStore, VerifiesPersistentWithTheEpilogueThroughTmaStores) {
  testing::TempDir dir;
  nlohmann::json r = testing::eval_matmul_verified(
      dir,
      std::string("BK=64,GROUP_M=4,IMPL=1,SK=1,WM=1,WN=1,TMA=1,CL=0,PERS=2,") + GetParam().params,
      "M=640,N=768,K=1024");
  EXPECT_EQ(testing::grid_x(r), GetParam().tiles) << r.dump();
}

INSTANTIATE_TEST_SUITE_P(Tiles, MatmulTmaStore,
                         ::testing::Values(StoreTile{"BM=128,BN=256,STAGES=4", 15},
                                           StoreTile{"BM=256,BN=128,STAGES=4", 18},
                                           StoreTile{"BM=128,BN=192,STAGES=4", 20},
                                           StoreTile{"BM=128,BN=128,STAGES=6", 30}),
                         [](const ::testing::TestParamInfo<StoreTile>& i) {
                           const std::string p = i.param.params;
                           return "Tile" + p.substr(3, 3) + "x" + p.substr(10, 3);
                         });

// 1900 x 2296 cuts into 15 x 18 = 270 tiles of 128 x 128 and 30 x 9 = 270 of 64 x 256: 132 CTAs,
// 6 of them with three tiles (warpgroup 0 takes two), the others with two. With clusters (CL 1:
// pairs of tiles one above the other, CL 2: side by side) 135 to 150 pairs: 66 clusters, each
// with two or three. K = 520 leaves the last K slice partly outside A and B.
class MatmulPingPong : public testing::HopperMatmulTest,
                       public ::testing::WithParamInterface<const char*> {};

TEST_P(MatmulPingPong, VerifiesWithEachWarpgroupOwningEveryOtherTile) {
  testing::TempDir dir;
  nlohmann::json r = testing::eval_matmul_verified(
      dir, std::string("BK=64,GROUP_M=8,IMPL=1,SK=1,WM=1,WN=1,TMA=1,PERS=3,") + GetParam(),
      "M=1900,N=2296,K=520");
  EXPECT_EQ(testing::grid_x(r), 132) << r.dump();
}

INSTANTIATE_TEST_SUITE_P(Tiles, MatmulPingPong,
                         ::testing::Values("CL=0,BM=128,BN=128,STAGES=6",
                                           "CL=0,BM=64,BN=256,STAGES=4",
                                           "CL=1,BM=128,BN=128,STAGES=6",
                                           "CL=2,BM=128,BN=128,STAGES=5",
                                           "CL=2,BM=64,BN=256,STAGES=4"),
                         [](const ::testing::TestParamInfo<const char*>& i) {
                           std::string name;  // CL0_BM128_BN128_STAGES6
                           for (char c : std::string(i.param)) {
                             if (c == ',')
                               name += '_';
                             else if (c != '=')
                               name += c;
                           }
                           return name;
                         });

struct StreamKCase {
  const char* shape;
  const char* tile;
};
void PrintTo(const StreamKCase& c, std::ostream* os) { *os << c.shape << " " << c.tile; }

class MatmulStreamK : public testing::HopperMatmulTest,
                      public ::testing::WithParamInterface<StreamKCase> {};

TEST_P(MatmulStreamK, VerifiesWithTheLastWaveSplitAlongK) {
  testing::TempDir dir;
  nlohmann::json r = testing::eval_matmul_verified(
      dir,
      std::string("BK=64,GROUP_M=8,IMPL=1,SK=1,WM=1,WN=1,TMA=1,CL=0,PERS=4,") + GetParam().tile,
      GetParam().shape);
  EXPECT_EQ(testing::grid_x(r), 132) << r.dump();
}

// 1900 x 2296 x 520 in 128 x 256 tiles: 15 x 9 = 135, so 3 tail tiles of 9 K slices, 27 slices
// for 132 CTAs (most ranges empty). 2550 x 3064 x 520: 20 x 12 = 240 tiles, 108 in the tail,
// 7.4 slices per CTA, so ranges cross tile boundaries; in 256 x 128 tiles 10 x 24, the same.
// 640 x 768: 15 tiles, whose partials would not fit in M x N floats: all whole.
INSTANTIATE_TEST_SUITE_P(
    Shapes, MatmulStreamK,
    ::testing::Values(StreamKCase{"M=1900,N=2296,K=520", "BM=128,BN=256,STAGES=4"},
                      StreamKCase{"M=2550,N=3064,K=520", "BM=128,BN=256,STAGES=4"},
                      StreamKCase{"M=2550,N=3064,K=520", "BM=256,BN=128,STAGES=4"},
                      StreamKCase{"M=640,N=768,K=1024", "BM=128,BN=128,STAGES=6"}),
    [](const ::testing::TestParamInfo<StreamKCase>& i) {
      std::string name;  // M1900_N2296_K520_BM128_BN256
      for (const char* p : {i.param.shape, i.param.tile}) {
        for (const char* c = p; *c; ++c) {
          if (*c == ',')
            name += '_';
          else if (*c != '=')
            name += *c;
        }
        if (p == i.param.shape) name += '_';
      }
      return name.substr(0, name.find("_STAGES"));
    });

}  // namespace
}  // namespace kiln

#else

TEST(MatmulTmaMulticast, NeedsCudaHeaders) {
  GTEST_SKIP() << "no CUDA GPU: built without CUDA headers";
}

#endif
