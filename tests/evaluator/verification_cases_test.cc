// The verification stages' cases, read from the built-in targets' specs: which shapes, dtypes
// and distributions each stage runs (docs/threats.md row 17: not only at one shape).
#include "evaluator/verification_cases.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "tests/support/test_env.h"

namespace kiln::eval {
namespace {

TargetSpec builtin(const std::string& name) {
  auto t = testing::load_builtin_target(name);
  EXPECT_TRUE(t.is_ok()) << t.status().to_string();
  return t.is_ok() ? *t : TargetSpec{};
}

int64_t elements(const Shape& s) {
  int64_t n = 1;
  for (const auto& [dim, v] : s) n *= v;
  return n;
}

bool has(const std::vector<CaseSpec>& cases, const Shape& shape, DType dtype, Distribution d) {
  return std::any_of(cases.begin(), cases.end(), [&](const CaseSpec& c) {
    return c.shape == shape && c.dtype == dtype && c.dist == d;
  });
}

TEST(VerificationCases, TheAdversarialStageBreaksNumericsAtTheLargestSweepShapeAndEveryEdge) {
  const TargetSpec t = builtin("reduce");
  ASSERT_FALSE(t.sweep.empty());
  ASSERT_FALSE(t.edge.empty());
  const auto cases = verification_cases(t, {DType::kF16, DType::kF32}, "adversarial", DType::kF32);
  for (Distribution d :
       {Distribution::kLargeMagnitude, Distribution::kSmallMagnitude, Distribution::kMixedScale,
        Distribution::kAllEqual, Distribution::kZeros, Distribution::kSpecial}) {
    EXPECT_TRUE(has(cases, t.sweep.front(), DType::kF32, d)) << distribution_name(d);
  }
  EXPECT_TRUE(has(cases, t.sweep.front(), DType::kF16, Distribution::kSpecial));
  EXPECT_FALSE(has(cases, t.sweep.front(), DType::kF16, Distribution::kZeros));
  std::vector<Shape> more = t.edge;
  more.push_back(largest_sweep_shape(t));
  for (const Shape& s : more) {
    for (Distribution d :
         {Distribution::kLargeMagnitude, Distribution::kMixedScale, Distribution::kSpecial}) {
      EXPECT_TRUE(has(cases, s, DType::kF32, d)) << shape_string(s) << distribution_name(d);
    }
  }
  for (const CaseSpec& c : cases) EXPECT_EQ(c.stage, "adversarial");
}

TEST(VerificationCases, ATargetsAdversarialSkipLeavesOnlyThoseDistributionsOutInThatDtype) {
  const TargetSpec t = builtin("fused_mlp");  // skips large_magnitude, mixed_scale in f16
  const auto f16 = verification_cases(t, {DType::kF16, DType::kBF16}, "adversarial", DType::kF16);
  for (const CaseSpec& c : f16) {
    if (c.dtype == DType::kF16) {
      EXPECT_NE(c.dist, Distribution::kLargeMagnitude);
      EXPECT_NE(c.dist, Distribution::kMixedScale);
    }
  }
  EXPECT_TRUE(has(f16, t.sweep.front(), DType::kF16, Distribution::kSpecial));
  EXPECT_TRUE(has(f16, t.sweep.front(), DType::kBF16, Distribution::kLargeMagnitude));
}

TEST(VerificationCases, DeterminismRepeatsAtTheLargestSweepShapeAndEachEdgeOnce) {
  const TargetSpec t = builtin("softmax");
  const auto cases = verification_cases(t, {DType::kF32}, "determinism", DType::kF32);
  ASSERT_FALSE(cases.empty());
  EXPECT_EQ(cases.front().shape, largest_sweep_shape(t));
  for (const Shape& e : t.edge) {
    EXPECT_EQ(
        std::count_if(cases.begin(), cases.end(), [&](const CaseSpec& c) { return c.shape == e; }),
        1)
        << shape_string(e);
  }
  for (const Shape& s : t.sweep) {
    EXPECT_LE(elements(s), elements(largest_sweep_shape(t)));
  }
  EXPECT_TRUE(verification_cases(t, {DType::kF32}, "no such stage", DType::kF32).empty());
}

}  // namespace
}  // namespace kiln::eval
