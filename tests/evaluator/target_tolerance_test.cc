// A target's tolerance must pass every honest kernel on every input the verification stages draw,
// and still fail the precision cheats (docs/threats.md row 10). Checked here for reduce in f32,
// whose row sums of large-magnitude inputs cancel: a sum near zero carries the rounding error of
// partial sums in the hundreds of thousands. An absolute tolerance alone failed an honest fp32
// accumulation in CI (error 0.499 > 0.25); a term scaled by the outputs' root mean square then
// held at the first sweep shape (64 rows) but not at the edge shape of one row, where the RMS is
// that one cancelled sum (CI again: error 0.818 > 0.291 at M=1, N=4099). So every shape the
// adversarial stage runs is checked here, with the tolerance's terms term fed by the reference
// on the squared inputs, as the evaluator computes it; rounding the inputs to f16 must stay far
// outside.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "evaluator/reference.h"
#include "evaluator/tensor_data.h"
#include "evaluator/verification_cases.h"
#include "shared/target_spec.h"
#include "tests/support/test_env.h"

namespace kiln::eval {
namespace {

struct RowSums {
  std::vector<double> reference;  // R(x): the target's reference on the f32 inputs
  std::vector<double> norms;      // sqrt(R(x*x)): the norms of each row's terms
  std::vector<float> fp32;        // the cpu seed: one float accumulator per row, in order
  std::vector<float> f16_inputs;  // the cheat: inputs through _Float16, float accumulator
};

// The row sums of m x n inputs drawn from each of `seeds` (one RowSums per seed). The reference
// runs once on all of them stacked (rows are independent): fewer, larger calls.
std::vector<RowSums> row_sums(const Reference& ref, Distribution d,
                              const std::vector<uint64_t>& seeds, int64_t m, int64_t n) {
  const size_t per = static_cast<size_t>(m * n);
  std::vector<double> x(per * seeds.size());
  std::vector<float> encoded(x.size());
  for (size_t k = 0; k < seeds.size(); ++k)
    generate(d, DType::kF32, seeds[k], per, x.data() + k * per, encoded.data() + k * per);
  std::vector<double> squares(x.size());
  for (size_t i = 0; i < x.size(); ++i) squares[i] = x[i] * x[i];
  const int64_t rows = m * static_cast<int64_t>(seeds.size());
  std::vector<double> reference(static_cast<size_t>(rows), 0.0),
      norms(static_cast<size_t>(rows), 0.0);
  EXPECT_TRUE(ref.compute({x.data()}, {reference.data()}, {rows, n}, {}).is_ok());
  EXPECT_TRUE(ref.compute({squares.data()}, {norms.data()}, {rows, n}, {}).is_ok());
  term_norms_from_squares(norms.data(), norms.size());
  std::vector<RowSums> out(seeds.size());
  for (size_t k = 0; k < seeds.size(); ++k) {
    RowSums& s = out[k];
    s.reference.assign(reference.begin() + k * m, reference.begin() + (k + 1) * m);
    s.norms.assign(norms.begin() + k * m, norms.begin() + (k + 1) * m);
    for (int64_t r = 0; r < m; ++r) {
      float acc = 0.f, cheat = 0.f;
      for (int64_t c = 0; c < n; ++c) {
        const float v = encoded[k * per + static_cast<size_t>(r * n + c)];
        acc += v;
        cheat += static_cast<float>(static_cast<_Float16>(v));
      }
      s.fp32.push_back(acc);
      s.f16_inputs.push_back(cheat);
    }
  }
  return out;
}

// The terms term widens each element by its own norm only: element 0 (norm 100) may be off by
// 0.1 + 1e-3 * 100, element 1 (norm 1) by 0.1 + 1e-3. A missing or non-finite norm adds nothing,
// and without norms the tolerance is abs and rel alone.
TEST(TargetTolerance, TheTermsTermWidensEachElementByItsOwnNorm) {
  Tolerance tol;
  tol.abs = 0.1;
  tol.terms = 1e-3;
  const std::vector<double> ref = {0, 0, 0};
  const std::vector<double> norms = {100, 1, std::numeric_limits<double>::infinity()};
  const std::vector<float> inside = {0.19f, 0.1009f, 0.099f};
  CompareResult r =
      compare(DType::kF32, inside.data(), ref.data(), 3, tol, 0xFF, "y", norms.data());
  EXPECT_TRUE(r.passed) << r.detail;

  const std::vector<float> second_off = {0.19f, 0.102f, 0.0f};
  r = compare(DType::kF32, second_off.data(), ref.data(), 3, tol, 0xFF, "y", norms.data());
  EXPECT_FALSE(r.passed);
  EXPECT_EQ(r.first_bad, 1u);
  EXPECT_NE(r.detail.find("tolerance abs 0.101 (0.1 + terms 0.001 * 1, the root of "
                          "the summed squared terms) + rel 0"),
            std::string::npos)
      << r.detail;

  const std::vector<float> third_off = {0.0f, 0.0f, 0.11f};  // its norm is not finite
  EXPECT_FALSE(
      compare(DType::kF32, third_off.data(), ref.data(), 3, tol, 0xFF, "y", norms.data()).passed);
  EXPECT_FALSE(compare(DType::kF32, inside.data(), ref.data(), 3, tol, 0xFF, "y").passed);
}

// flash_attention's kiln_reference_terms: for one query over two keys (no mask, scale 1), the
// size of the terms is sum p|v| plus how far o moves when each score moves by its own magnitude.
// Tied scores (1000 and 1000) with values 0 and 10 give 5 + 0.5*5*1000 + 0.5*5*1000; one key
// far ahead (1000 against 0) gives the dominant key's |v| = 0 and almost nothing else.
TEST(TargetTolerance, FlashAttentionTermsAreLargeOnlyWhereTheSoftmaxIsNearlyTied) {
  testing::TempDir dir;
  auto target = testing::load_builtin_target("flash_attention");
  ASSERT_TRUE(target.is_ok()) << target.status().to_string();
  auto ref = Reference::build(*target, dir.path());
  ASSERT_TRUE(ref.is_ok()) << ref.status().to_string();
  ASSERT_TRUE((*ref)->has_terms());
  const std::vector<int64_t> dims = {1, 1, 2, 1, 1};  // B, H, L, D, MASK (1: no mask)
  auto terms_of_row_1 = [&](std::vector<double> k) {
    std::vector<double> q = {1, 1}, v = {0, 10}, t = {-1, -1};
    EXPECT_TRUE((*ref)
                    ->compute_terms({q.data(), k.data(), v.data()}, {t.data()}, dims, {1.0}, {1})
                    .is_ok());
    EXPECT_EQ(t[0], -1);  // row 0 was not asked for
    return t[1];
  };
  EXPECT_NEAR(terms_of_row_1({1000, 1000}), 5 + 5000, 1e-6);
  EXPECT_NEAR(terms_of_row_1({1000, 0}), 0, 1e-6);
}

// The shapes the adversarial stage runs in the timed dtype, each once, as the evaluator picks
// them (the first sweep shape, the largest sweep shape, the edge shapes).
std::vector<Shape> adversarial_shapes(const TargetSpec& t, DType dtype) {
  std::vector<Shape> shapes;
  for (const CaseSpec& c : verification_cases(t, {dtype}, "adversarial", dtype)) {
    if (std::find(shapes.begin(), shapes.end(), c.shape) == shapes.end()) shapes.push_back(c.shape);
  }
  return shapes;
}

TEST(TargetTolerance,
     ReduceF32PassesSequentialFp32SumsOfAdversarialInputsAtEveryShapeAndFailsF16Inputs) {
  testing::TempDir dir;
  auto target = testing::load_builtin_target("reduce");
  ASSERT_TRUE(target.is_ok()) << target.status().to_string();
  ASSERT_TRUE(target->tolerance.count(DType::kF32));
  auto ref = Reference::build(*target, dir.path());
  ASSERT_TRUE(ref.is_ok()) << ref.status().to_string();
  ASSERT_FALSE(target->sweep.empty());
  int cheats_caught = 0;
  const std::vector<Shape> shapes = adversarial_shapes(*target, DType::kF32);
  ASSERT_GE(shapes.size(), 1 + target->edge.size()) << "the stage runs at every edge shape";
  for (const Shape& shape : shapes) {
    const int64_t m = shape.at("M"), n = shape.at("N");
    const Tolerance tol = tolerance_at(*target, DType::kF32, shape);
    // Enough seeds at large magnitude that a failure rate of 1 in 1000 per shape shows: the
    // tolerance without its terms term failed the one-row shape 23 times in 20,000 draws.
    const uint64_t elements = static_cast<uint64_t>(m * n);
    for (Distribution d :
         {Distribution::kLargeMagnitude, Distribution::kMixedScale, Distribution::kNormal}) {
      const uint64_t budget = d == Distribution::kLargeMagnitude ? 24'000'000 : 2'000'000;
      const uint64_t seeds = std::clamp<uint64_t>(budget / elements, 40, 6000);
      // Batches of up to 2^21 elements, the seeds in order.
      const uint64_t batch = std::max<uint64_t>(1, (uint64_t{1} << 21) / elements);
      std::vector<RowSums> sums;
      for (uint64_t seed = 1; seed <= seeds; ++seed) {
        if ((seed - 1) % batch == 0) {
          std::vector<uint64_t> next;
          for (uint64_t k = seed; k < seed + batch && k <= seeds; ++k) next.push_back(k);
          sums = row_sums(**ref, d, next, m, n);
        }
        SCOPED_TRACE(std::to_string(m) + "x" + std::to_string(n) + " " +
                     std::string(distribution_name(d)) + " seed " + std::to_string(seed));
        const RowSums& s = sums[(seed - 1) % batch];
        const size_t rows = s.reference.size();
        CompareResult honest = compare(DType::kF32, s.fp32.data(), s.reference.data(), rows, tol,
                                       0xFF, "y", s.norms.data());
        ASSERT_TRUE(honest.passed) << honest.detail;
        // At unit scale f16 inputs stay inside any fp32 tolerance a sum needs; at large magnitude
        // over long rows they must fail. Where there are 10 rows or more: one row's error is one
        // normal draw about 6 times its tolerance, inside it about 1 time in 7, while the stage's
        // shapes of many rows catch the cheat for certain.
        if (d != Distribution::kLargeMagnitude || n < 1000 || m < 10) continue;
        CompareResult cheat = compare(DType::kF32, s.f16_inputs.data(), s.reference.data(), rows,
                                      tol, 0xFF, "y", s.norms.data());
        EXPECT_FALSE(cheat.passed) << "worst error " << cheat.worst_abs_error;
        cheats_caught += !cheat.passed;
      }
    }
  }
  EXPECT_GT(cheats_caught, 0);
}

}  // namespace
}  // namespace kiln::eval
