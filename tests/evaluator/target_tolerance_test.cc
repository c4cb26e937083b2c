// A target's tolerance must pass every honest kernel on every input the verification stages draw,
// and still fail the precision cheats (docs/threats.md row 10). Checked here for reduce in f32,
// whose row sums of large-magnitude inputs cancel: a sum near zero carries the rounding error of
// partial sums in the hundreds of thousands, which once failed an honest fp32 accumulation in CI
// (error 0.499 against an absolute tolerance of 0.25). The tolerance now scales with the outputs'
// root mean square; rounding the inputs to f16 must stay far outside it.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "evaluator/tensor_data.h"
#include "shared/target_spec.h"

namespace kiln::eval {
namespace {

struct RowSums {
  std::vector<double> reference;  // exact enough: double accumulation of the f32 inputs
  std::vector<float> fp32;        // the cpu seed: one float accumulator per row, in order
  std::vector<float> f16_inputs;  // the cheat: inputs through _Float16, float accumulator
};

RowSums row_sums(Distribution d, uint64_t seed, int64_t m, int64_t n) {
  std::vector<double> x(static_cast<size_t>(m * n));
  std::vector<float> encoded(x.size());
  generate(d, DType::kF32, seed, x.size(), x.data(), encoded.data());
  RowSums s;
  for (int64_t r = 0; r < m; ++r) {
    double exact = 0;
    float acc = 0.f, cheat = 0.f;
    for (int64_t c = 0; c < n; ++c) {
      const float v = encoded[static_cast<size_t>(r * n + c)];
      exact += static_cast<double>(v);
      acc += v;
      cheat += static_cast<float>(static_cast<_Float16>(v));
    }
    s.reference.push_back(exact);
    s.fp32.push_back(acc);
    s.f16_inputs.push_back(cheat);
  }
  return s;
}

TEST(TargetTolerance, ReduceF32PassesSequentialFp32SumsOfAdversarialInputsAndFailsF16InputsAtLargeMagnitude) {
  auto target = load_target(std::string(KILN_SOURCE_DIR) + "/targets/reduce");
  ASSERT_TRUE(target.is_ok()) << target.status().to_string();
  ASSERT_TRUE(target->tolerance.count(DType::kF32));
  const Tolerance tol = target->tolerance.at(DType::kF32);
  ASSERT_FALSE(target->sweep.empty());
  const Shape& shape = target->sweep.front();  // the adversarial stage's shape
  const int64_t m = shape.at("M"), n = shape.at("N");
  for (Distribution d : {Distribution::kLargeMagnitude, Distribution::kMixedScale, Distribution::kNormal}) {
    for (uint64_t seed = 1; seed <= (d == Distribution::kLargeMagnitude ? 400u : 40u); ++seed) {
      SCOPED_TRACE(std::string(distribution_name(d)) + " seed " + std::to_string(seed));
      RowSums s = row_sums(d, seed, m, n);
      const size_t rows = s.reference.size();
      CompareResult honest = compare(DType::kF32, s.fp32.data(), s.reference.data(), rows, tol, 0xFF, "y");
      EXPECT_TRUE(honest.passed) << honest.detail;
      // At unit scale f16 inputs stay inside any fp32 tolerance a sum needs; the large-magnitude
      // case of the same stage is where they must fail.
      if (d != Distribution::kLargeMagnitude) continue;
      CompareResult cheat = compare(DType::kF32, s.f16_inputs.data(), s.reference.data(), rows, tol, 0xFF, "y");
      EXPECT_FALSE(cheat.passed) << "worst error " << cheat.worst_abs_error;
    }
  }
}

}  // namespace
}  // namespace kiln::eval
