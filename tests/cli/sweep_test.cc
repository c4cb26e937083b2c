#include "cli/sweep.h"

#include <gtest/gtest.h>

#include <set>

#include "tests/support/test_env.h"

namespace kiln::cli {
namespace {

TEST(Sweep, EnumeratesEveryConfigurationThatMeetsTheConstraints) {
  // A space of its own (the built-in templates change as they are tuned).
  KernelSpec spec;
  spec.space = {{"BLOCK", {64, 128, 256, 512}}, {"VEC", {1, 2, 4, 8}}, {"ROWS", {1, 2, 4}}};
  spec.constraints = {"VEC * S <= 16", "ROWS * 32 <= BLOCK"};
  const Shape shape = {{"M", 16384}, {"N", 4096}};
  auto f16 = template_configs(spec, shape, DType::kF16, 0, 1);
  auto f32 = template_configs(spec, shape, DType::kF32, 0, 1);
  // BLOCK(4) x VEC(4) x ROWS(3) = 48; "VEC * S <= 16" drops VEC=8 for f32; "ROWS*32 <= BLOCK"
  // drops ROWS=4 at BLOCK=64.
  EXPECT_EQ(f16.size(), 4u * 4u * 3u - 4u);
  EXPECT_EQ(f32.size(), 4u * 3u * 3u - 3u);
  std::set<std::map<std::string, std::string>> unique(f16.begin(), f16.end());
  EXPECT_EQ(unique.size(), f16.size());
  for (const auto& c : f32) {
    EXPECT_NE(c.at("VEC"), "8");
    EXPECT_LE(std::stoi(c.at("ROWS")) * 32, std::stoi(c.at("BLOCK")));
  }
}

TEST(Sweep, LimitTakesASeededSampleOfTheSpace) {
  Result<TargetSpec> t = load_target(std::string(KILN_SOURCE_DIR) + "/targets/reduce");
  ASSERT_TRUE(t.is_ok());
  const KernelSpec& spec = *t->backend("cuda")->tunable;
  auto a = template_configs(spec, t->benchmark, DType::kF16, 5, 7);
  auto b = template_configs(spec, t->benchmark, DType::kF16, 5, 7);
  auto c = template_configs(spec, t->benchmark, DType::kF16, 5, 8);
  EXPECT_EQ(a.size(), 5u);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
}

TEST(Sweep, KilnEvalSweepVerifiesAndRanksCpuConfigurations) {
  testing::TempDir cache;
  std::string out;
  int rc = testing::run_command(testing::kiln_binary() +
                                    " eval reduce --backend cpu --sweep --shape M=64,N=512"
                                    " --cache-dir " + cache.path(), &out);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("3 of 3 configurations verified"), std::string::npos) << out;
  EXPECT_NE(out.find("evaluations per hour"), std::string::npos) << out;
}

}  // namespace
}  // namespace kiln::cli
