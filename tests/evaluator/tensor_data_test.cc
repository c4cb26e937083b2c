// Tests of tensor_data: exhaustive f16 / bf16 round trips and rounding edges, generation that is
// deterministic and thread-count independent with the promised distributions, compare()'s contract
// case by case, checksum sensitivity and seed sources.
#include "evaluator/tensor_data.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <set>
#include <vector>

namespace kiln::eval {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr Distribution kAllDistributions[] = {
    Distribution::kNormal,         Distribution::kUniform,    Distribution::kLargeMagnitude,
    Distribution::kSmallMagnitude, Distribution::kMixedScale, Distribution::kAllEqual,
    Distribution::kZeros,          Distribution::kSpecial};
constexpr DType kAllDTypes[] = {DType::kF16, DType::kBF16, DType::kF32,
                                DType::kF64, DType::kI32,  DType::kI64};

uint16_t bits16(DType t, double v) {
  uint16_t b = 0;
  encode(t, &v, 1, &b);
  return b;
}

double from16(DType t, uint16_t b) {
  double v = 0;
  decode(t, &b, 1, &v);
  return v;
}

// Decodes all 65,536 patterns, encodes them back: the same bits, except that NaNs may take another
// payload but stay NaN of the same sign.
void expect_every_pattern_round_trips(DType t, int exp_bits, int mant_bits) {
  std::vector<uint16_t> in(65536), out(65536);
  for (uint32_t b = 0; b < 65536; ++b) in[b] = static_cast<uint16_t>(b);
  std::vector<double> values(65536);
  decode(t, in.data(), in.size(), values.data());
  encode(t, values.data(), values.size(), out.data());
  const uint32_t exp_max = (1u << exp_bits) - 1;
  int failures = 0;
  for (uint32_t b = 0; b < 65536 && failures < 5; ++b) {
    const bool nan_bits = ((b >> mant_bits) & exp_max) == exp_max && (b & ((1u << mant_bits) - 1));
    if (nan_bits) {
      const bool ok = std::isnan(values[b]) && ((out[b] >> mant_bits) & exp_max) == exp_max &&
                      (out[b] & (1u << (mant_bits - 1))) != 0 && (out[b] >> 15) == (b >> 15);
      if (!ok) ++failures;
      EXPECT_TRUE(ok) << std::hex << "NaN pattern 0x" << b << " -> 0x" << out[b];
    } else {
      if (out[b] != b) ++failures;
      EXPECT_EQ(out[b], b) << std::hex << "pattern 0x" << b << " decoded to " << values[b];
      EXPECT_EQ(round_to(t, values[b]), values[b]) << "representable value moved: " << values[b];
    }
  }
}

TEST(TensorDataF16, EveryBitPatternRoundTrips) {
  expect_every_pattern_round_trips(DType::kF16, 5, 10);
}

TEST(TensorDataBF16, EveryBitPatternRoundTrips) {
  expect_every_pattern_round_trips(DType::kBF16, 8, 7);
}

TEST(TensorDataF16, RoundsToNearestEvenAtTies) {
  const DType t = DType::kF16;                            // spacing 2^-10 just above 1
  EXPECT_EQ(bits16(t, 1.0 + 0x1p-11), 0x3C00);            // tie: down to the even 1.0
  EXPECT_EQ(bits16(t, 1.0 + 3 * 0x1p-11), 0x3C02);        // tie: up to the even 1 + 2^-9
  EXPECT_EQ(bits16(t, 1.0 + 0x1p-11 + 0x1p-40), 0x3C01);  // just above a tie: up
  EXPECT_EQ(bits16(t, 1.0 + 0x1p-11 - 0x1p-40), 0x3C00);  // just below a tie: down
  EXPECT_EQ(bits16(t, -(1.0 + 3 * 0x1p-11)), 0xBC02);
  EXPECT_EQ(bits16(t, 2.0 - 0x1p-12), 0x4000);  // carry into the exponent
  EXPECT_EQ(round_to(t, 1.0001), 1.0);
}

TEST(TensorDataF16, OverflowsToInfinityAtTheRoundingBoundary) {
  const DType t = DType::kF16;
  EXPECT_EQ(bits16(t, 65504.0), 0x7BFF);
  EXPECT_EQ(from16(t, 0x7BFF), 65504.0);
  EXPECT_EQ(bits16(t, 65519.99), 0x7BFF);  // below the midpoint to 65536: stays finite
  EXPECT_EQ(bits16(t, 65520.0), 0x7C00);   // the midpoint ties to even, which is infinity
  EXPECT_EQ(bits16(t, -65520.0), 0xFC00);
  EXPECT_EQ(bits16(t, 1e300), 0x7C00);
  EXPECT_EQ(bits16(t, kInf), 0x7C00);
  EXPECT_EQ(bits16(t, -kInf), 0xFC00);
  EXPECT_EQ(round_to(t, 70000.0), kInf);
}

TEST(TensorDataF16, RoundsSubnormalsAndUnderflow) {
  const DType t = DType::kF16;
  EXPECT_EQ(bits16(t, 0x1p-24), 0x0001);  // smallest subnormal
  EXPECT_EQ(from16(t, 0x0001), 0x1p-24);
  EXPECT_EQ(bits16(t, -0x1p-24), 0x8001);
  EXPECT_EQ(bits16(t, 0x1p-25), 0x0000);                  // tie with zero: to even (zero)
  EXPECT_EQ(bits16(t, -0x1p-25), 0x8000);                 // keeps the sign
  EXPECT_EQ(bits16(t, 0x1p-25 * (1 + 0x1p-30)), 0x0001);  // just above that tie
  EXPECT_EQ(bits16(t, 3 * 0x1p-25), 0x0002);              // tie between 1 and 2 units: 2
  EXPECT_EQ(bits16(t, 5 * 0x1p-25), 0x0002);              // tie between 2 and 3 units: 2
  EXPECT_EQ(bits16(t, 1023 * 0x1p-24), 0x03FF);           // largest subnormal
  EXPECT_EQ(bits16(t, 1023.5 * 0x1p-24), 0x0400);         // ties up into the smallest normal
  EXPECT_EQ(bits16(t, 0x1p-14), 0x0400);
  EXPECT_EQ(bits16(t, 1e-30), 0x0000);
  EXPECT_EQ(bits16(t, 4.9e-324), 0x0000);  // a double subnormal
}

TEST(TensorDataBF16, RoundsTiesOverflowAndSubnormals) {
  const DType t = DType::kBF16;  // spacing 2^-7 just above 1
  EXPECT_EQ(bits16(t, 1.0), 0x3F80);
  EXPECT_EQ(bits16(t, 1.0 + 0x1p-8), 0x3F80);            // tie: down to even
  EXPECT_EQ(bits16(t, 1.0 + 3 * 0x1p-8), 0x3F82);        // tie: up to even
  EXPECT_EQ(bits16(t, 1.0 + 0x1p-8 + 0x1p-40), 0x3F81);  // a float cast first would tie down
  EXPECT_EQ(bits16(t, (2 - 0x1p-7) * 0x1p127), 0x7F7F);  // largest finite
  EXPECT_EQ(bits16(t, (2 - 0x1p-8) * 0x1p127), 0x7F80);  // midpoint to 2^128: infinity
  EXPECT_EQ(bits16(t, 0x1p-133), 0x0001);                // smallest subnormal
  EXPECT_EQ(from16(t, 0x0001), 0x1p-133);
  EXPECT_EQ(bits16(t, 0x1p-134), 0x0000);
}

TEST(TensorDataConvert, NaNStaysAQuietNaN) {
  const double signalling = std::bit_cast<double>(uint64_t{0x7FF0000000000001});
  for (DType t : {DType::kF16, DType::kBF16}) {
    for (double v : {kNaN, -kNaN, signalling}) {
      const uint16_t b = bits16(t, v);
      const uint16_t quiet = t == DType::kF16 ? 0x7E00 : 0x7FC0;
      EXPECT_EQ(b & quiet, quiet) << dtype_name(t) << std::hex << " got 0x" << b;
      EXPECT_TRUE(std::isnan(from16(t, b)));
      EXPECT_TRUE(std::isnan(round_to(t, v)));
    }
  }
  EXPECT_TRUE(std::isnan(round_to(DType::kF32, kNaN)));
}

TEST(TensorDataConvert, F32UsesTheFloatCastAndIntegersSaturate) {
  EXPECT_EQ(round_to(DType::kF32, 1.0 + 0x1p-24), 1.0);
  EXPECT_EQ(round_to(DType::kF32, 1.0 + 3 * 0x1p-24), 1.0 + 0x1p-22);
  EXPECT_EQ(round_to(DType::kF32, 1e39), kInf);
  EXPECT_EQ(round_to(DType::kF64, 0.1), 0.1);
  EXPECT_EQ(round_to(DType::kI32, 2.5), 2.0);
  EXPECT_EQ(round_to(DType::kI32, 3.5), 4.0);
  EXPECT_EQ(round_to(DType::kI32, -2.5), -2.0);
  EXPECT_EQ(round_to(DType::kI32, 1e20), 2147483647.0);
  EXPECT_EQ(round_to(DType::kI32, -kInf), -2147483648.0);
  EXPECT_EQ(round_to(DType::kI32, kNaN), 0.0);
  const double v[] = {-7.0, 123456789012.0, 1e30};
  int64_t out[3];
  encode(DType::kI64, v, 3, out);
  EXPECT_EQ(out[0], -7);
  EXPECT_EQ(out[1], 123456789012);
  EXPECT_EQ(out[2], std::numeric_limits<int64_t>::max());
}

struct Generated {
  std::vector<double> values;
  std::vector<unsigned char> encoded;
};

Generated gen(Distribution d, DType t, uint64_t seed, size_t n) {
  Generated g{std::vector<double>(n), std::vector<unsigned char>(n * dtype_bytes(t))};
  generate(d, t, seed, n, g.values.data(), g.encoded.data());
  return g;
}

bool same_value(double a, double b) { return (std::isnan(a) && std::isnan(b)) || a == b; }

TEST(TensorDataGenerate, SameSeedRepeatsAndOtherSeedsDiffer) {
  for (Distribution d : kAllDistributions) {
    for (DType t : kAllDTypes) {
      const Generated a = gen(d, t, 42, 4096), b = gen(d, t, 42, 4096), c = gen(d, t, 43, 4096);
      EXPECT_EQ(a.encoded, b.encoded) << distribution_name(d) << " " << dtype_name(t);
      if (d != Distribution::kZeros) {
        EXPECT_NE(a.encoded, c.encoded) << distribution_name(d) << " " << dtype_name(t);
      }
    }
  }
}

TEST(TensorDataGenerate, ParallelCallMatchesValuesComputedOneByOne) {
  const size_t n = 3'000'000;  // above the parallel threshold
  for (Distribution d : {Distribution::kNormal, Distribution::kUniform, Distribution::kMixedScale,
                         Distribution::kSpecial}) {
    const DType t = d == Distribution::kSpecial ? DType::kBF16 : DType::kF16;
    const Generated big = gen(d, t, 7, n);
    const Generated small = gen(d, t, 7, 1001);  // serial path: a prefix of the same values
    size_t bad = 0;
    for (size_t i = 0; i < small.values.size(); ++i)
      bad += !same_value(small.values[i], big.values[i]);
    for (size_t i = 0; i < n; i += (d == Distribution::kNormal ? 1 : 7)) {
      bad += !same_value(sample_at(d, t, 7, i), big.values[i]);
    }
    EXPECT_EQ(bad, 0u) << distribution_name(d);
  }
}

TEST(TensorDataGenerate, ValuesAreExactlyWhatTheEncodingHolds) {
  for (Distribution d : kAllDistributions) {
    for (DType t : kAllDTypes) {
      const Generated g = gen(d, t, 5, 20000);
      std::vector<double> back(g.values.size());
      decode(t, g.encoded.data(), back.size(), back.data());
      size_t bad = 0;
      for (size_t i = 0; i < back.size(); ++i) {
        bad +=
            !same_value(back[i], g.values[i]) || !same_value(round_to(t, g.values[i]), g.values[i]);
      }
      EXPECT_EQ(bad, 0u) << distribution_name(d) << " " << dtype_name(t);
    }
  }
}

struct Moments {
  double mean = 0, std = 0, max_abs = 0;
};

Moments moments(const std::vector<double>& v) {
  Moments m;
  for (double x : v) m.mean += x;
  m.mean /= static_cast<double>(v.size());
  for (double x : v) {
    m.std += (x - m.mean) * (x - m.mean);
    m.max_abs = std::max(m.max_abs, std::fabs(x));
  }
  m.std = std::sqrt(m.std / static_cast<double>(v.size()));
  return m;
}

TEST(TensorDataGenerate, NormalAndUniformHaveTheirMoments) {
  const Moments normal = moments(gen(Distribution::kNormal, DType::kF32, 11, 1 << 20).values);
  EXPECT_NEAR(normal.mean, 0.0, 0.01);
  EXPECT_NEAR(normal.std, 1.0, 0.01);
  EXPECT_GT(normal.max_abs, 4.0);
  const Moments uniform = moments(gen(Distribution::kUniform, DType::kF32, 11, 1 << 20).values);
  EXPECT_NEAR(uniform.mean, 0.0, 0.01);
  EXPECT_NEAR(uniform.std, 1.0 / std::sqrt(3.0), 0.01);
  EXPECT_LE(uniform.max_abs, 1.0);
}

TEST(TensorDataGenerate, MagnitudesFollowTheDtype) {
  struct Case {
    Distribution d;
    DType t;
    double std;
  } cases[] = {{Distribution::kLargeMagnitude, DType::kF16, 1e2},
               {Distribution::kLargeMagnitude, DType::kBF16, 1e4},
               {Distribution::kLargeMagnitude, DType::kF32, 1e4},
               {Distribution::kSmallMagnitude, DType::kF16, 1e-3},
               {Distribution::kSmallMagnitude, DType::kBF16, 1e-6},
               {Distribution::kSmallMagnitude, DType::kF32, 1e-6},
               {Distribution::kNormal, DType::kI32, 1e2}};
  for (const Case& c : cases) {
    const Moments m = moments(gen(c.d, c.t, 3, 100000).values);
    EXPECT_NEAR(m.std / c.std, 1.0, 0.05) << distribution_name(c.d) << " " << dtype_name(c.t);
    EXPECT_TRUE(std::isfinite(m.max_abs));
  }
  // Mixed scale: exponents spread over 2^-8 .. 2^8 times N(0, 1).
  const std::vector<double> mixed = gen(Distribution::kMixedScale, DType::kF32, 3, 100000).values;
  size_t big = 0, tiny = 0;
  for (double v : mixed) {
    big += std::fabs(v) > 64;
    tiny += v != 0 && std::fabs(v) < 1.0 / 64;
  }
  EXPECT_GT(big, 1000u);
  EXPECT_GT(tiny, 1000u);
}

TEST(TensorDataGenerate, ZerosAllEqualAndSpecialValues) {
  for (DType t : kAllDTypes) {
    for (double v : gen(Distribution::kZeros, t, 1, 5000).values) ASSERT_EQ(v, 0.0);
    const std::vector<double> eq = gen(Distribution::kAllEqual, t, 1, 5000).values;
    for (double v : eq) ASSERT_EQ(v, eq[0]);
  }
  EXPECT_NE(gen(Distribution::kAllEqual, DType::kF32, 1, 1).values[0], 0.0);
  const std::vector<double> sp = gen(Distribution::kSpecial, DType::kF16, 1, 1 << 20).values;
  size_t pos_inf = 0, neg_inf = 0, nan = 0;
  for (double v : sp) {
    pos_inf += v == kInf;
    neg_inf += v == -kInf;
    nan += std::isnan(v);
  }
  EXPECT_GT(pos_inf, 100u);
  EXPECT_GT(neg_inf, 100u);
  EXPECT_GT(nan, 100u);
  EXPECT_LT(pos_inf + neg_inf + nan, 2000u);  // ~0.1%
}

// compare() on one f32 element: (got, reference, tolerance) -> passes?
struct CompareCase {
  const char* what;
  float got;
  double ref;
  Tolerance tol;
  bool passes;
};

TEST(TensorDataCompare, JudgesEachCaseOfTheContract) {
  const float fnan = std::numeric_limits<float>::quiet_NaN();
  const float finf = std::numeric_limits<float>::infinity();
  const CompareCase cases[] = {
      {"exact match", 0.5f, 0.5, {0, 0}, true},
      {"within abs", 1.001f, 1.0, {0, 0.002}, true},
      {"within rel", 101.0f, 100.0, {0.011, 0}, true},
      {"just outside", 1.003f, 1.0, {0, 0.002}, false},
      {"NaN expected, NaN got", fnan, kNaN, {0, 0}, true},
      {"NaN expected, finite got", 1.0f, kNaN, {1, 1}, false},
      {"NaN got, finite expected", fnan, 1.0, {1, 1}, false},
      {"inf got, finite expected", finf, 1.0, {1, 1}, false},
      {"inf matches", -finf, -kInf, {0, 0}, true},
      {"inf sign mismatch", finf, -kInf, {1, 1}, false},
      {"finite for inf", 3e38f, kInf, {1, 1}, false},
  };
  for (const CompareCase& c : cases) {
    const CompareResult r = compare(DType::kF32, &c.got, &c.ref, 1, c.tol, 0xFF, "y");
    EXPECT_EQ(r.passed, c.passes) << c.what << ": " << r.detail;
    EXPECT_EQ(r.mismatches, c.passes ? 0u : 1u) << c.what;
    if (!c.passes) {
      EXPECT_EQ(r.detail.rfind("y[0]: got ", 0), 0u) << c.what << ": " << r.detail;
    }
  }
}

// At the f16 overflow boundary a finite exact value rounds to infinity; an honest kernel that
// stores the largest finite value of the same sign (within the tolerance of the exact value) is
// right, one of the other sign or far off is not.
TEST(TensorDataCompare, AcceptsTheLargestFiniteValueWhereTheReferenceRoundsToInfinity) {
  const double ref = -65520.02;
  std::string bytes(2, '\0');
  const Tolerance tol{0.004, 1, 0};
  for (double got : {-65504.0, 65504.0, -60000.0}) {
    encode(DType::kF16, &got, 1, bytes.data());
    const CompareResult r = compare(DType::kF16, bytes.data(), &ref, 1, tol, 0xFF, "C");
    EXPECT_EQ(r.passed, got == -65504.0) << got << ": " << r.detail;
  }
}

// The mirror case: the exact value (-65519.98) rounds to the largest finite f16, but a kernel's own
// f32 sum can land past the boundary and store -inf (the matmul seed did, on the H100, at its
// mixed_scale adversarial case). -inf is right when a value within the tolerance of the exact one
// rounds to -inf; not +inf, not far from the boundary, not under a tolerance too tight to reach it.
TEST(TensorDataCompare, AcceptsInfinityWhereTheToleranceReachesTheOverflowBoundary) {
  const double inf = std::numeric_limits<double>::infinity();
  std::string bytes(2, '\0');
  struct Case {
    double ref, got;
    Tolerance tol;
    bool passes;
  };
  const Tolerance f16{4e-3, 1e-3, 0};
  for (const Case& c : {Case{-65519.98, -inf, f16, true}, Case{65519.98, inf, f16, true},
                        Case{-65519.98, inf, f16, false}, Case{-60000.0, -inf, f16, false},
                        Case{-65519.98, -inf, Tolerance{0, 1e-3, 0}, false},
                        Case{-65519.98, -65504.0, f16, true}}) {
    encode(DType::kF16, &c.got, 1, bytes.data());
    const CompareResult r = compare(DType::kF16, bytes.data(), &c.ref, 1, c.tol, 0xFF, "C");
    EXPECT_EQ(r.passed, c.passes) << c.ref << " vs " << c.got << ": " << r.detail;
  }
}

TEST(TensorDataCompare, DetailNamesTheFirstBadIndexGotExpectedAndTolerance) {
  const size_t n = 3'000'000;  // parallel path; the first bad index must still
                               // be the smallest
  std::vector<double> ref(n, 1.0);
  std::vector<float> out(n, 1.0f);
  out[2'500'000] = 1.5f;
  out[1'234'567] = 1.25f;
  const CompareResult r = compare(DType::kF32, out.data(), ref.data(), n, {0.01, 0.001}, 0xFF, "y");
  EXPECT_FALSE(r.passed);
  EXPECT_EQ(r.mismatches, 2u);
  EXPECT_EQ(r.first_bad, 1'234'567u);
  EXPECT_EQ(r.elements, n);
  EXPECT_DOUBLE_EQ(r.worst_abs_error, 0.5);
  EXPECT_DOUBLE_EQ(r.worst_rel_error, 0.5);
  EXPECT_NE(r.detail.find("y[1234567]: got 1.25, expected 1 "), std::string::npos) << r.detail;
  EXPECT_NE(r.detail.find("tolerance abs 0.001 + rel 0.01"), std::string::npos) << r.detail;
}

TEST(TensorDataCompare, PoisonedElementsCountAsUnwritten) {
  std::vector<double> ref(100, kNaN);  // even a NaN reference must not accept the poison NaN
  std::vector<uint16_t> out(100, 0x7E00);
  out[17] = 0xFFFF;
  out[60] = 0xFFFF;
  const CompareResult r = compare(DType::kF16, out.data(), ref.data(), 100, {0, 0}, 0xFF, "out");
  EXPECT_FALSE(r.passed);
  EXPECT_EQ(r.unwritten, 2u);
  EXPECT_EQ(r.mismatches, 2u);
  EXPECT_EQ(r.first_bad, 17u);
  EXPECT_EQ(r.detail.rfind("out[17]: unwritten (still holds the poison pattern)", 0), 0u)
      << r.detail;
}

TEST(TensorDataCompare, RoundsTheReferenceToTheDtypeFirst) {
  const double ref = 1.0001;
  const uint16_t one = 0x3C00;
  EXPECT_TRUE(compare(DType::kF16, &one, &ref, 1, {0, 0}, 0xFF, "y").passed);
  const double ref2 = 1.001;  // rounds to 1 + 2^-10, not 1
  const CompareResult r = compare(DType::kF16, &one, &ref2, 1, {0, 0}, 0xFF, "y");
  EXPECT_FALSE(r.passed);
  EXPECT_NE(r.detail.find("before rounding to f16"), std::string::npos) << r.detail;
  EXPECT_TRUE(compare(DType::kF16, &one, &ref, 0, {0, 0}, 0xFF, "y").passed);  // empty
}

TEST(TensorDataCompare, RmsTermScalesAbsoluteToleranceWithTheOutput) {
  // A dot product of terms ~100 that cancels to ~0: the error of an honest fp32 sum is judged
  // against the output's scale, not against |ref| of the cancelled element.
  const double ref[4] = {0.001, 300.0, -400.0, std::numeric_limits<double>::infinity()};
  const float out[4] = {0.05f, 300.0f, -400.0f, std::numeric_limits<float>::infinity()};
  Tolerance tight{1e-5, 1e-6, 0};
  EXPECT_FALSE(compare(DType::kF32, out, ref, 4, tight, 0xFF, "y").passed);
  Tolerance scaled{1e-5, 1e-6, 1e-3};  // abs += 1e-3 * rms(0.001, 300, -400) = 0.289
  EXPECT_TRUE(compare(DType::kF32, out, ref, 4, scaled, 0xFF, "y").passed);
  EXPECT_NEAR(finite_rms(ref, 4), std::sqrt((1e-6 + 9e4 + 1.6e5) / 3), 1e-9);
  EXPECT_NEAR(effective_tolerance(scaled, ref, 4).abs, 1e-6 + 1e-3 * finite_rms(ref, 4), 1e-12);
  const float far[4] = {1.0f, 300.0f, -400.0f, std::numeric_limits<float>::infinity()};
  EXPECT_FALSE(compare(DType::kF32, far, ref, 4, scaled, 0xFF, "y").passed);
}

TEST(TensorDataGenerate, ScaleMultipliesEveryValueBeforeRounding) {
  const size_t n = 1000;
  std::vector<double> plain(n), scaled(n);
  std::vector<float> ep(n), es(n);
  generate(Distribution::kNormal, DType::kF32, 9, n, plain.data(), ep.data());
  generate(Distribution::kNormal, DType::kF32, 9, n, scaled.data(), es.data(), 0.25);
  for (size_t i = 0; i < n; ++i) {
    ASSERT_EQ(scaled[i], plain[i] * 0.25) << i;  // a power of two: exact after rounding to f32
    ASSERT_EQ(es[i], static_cast<float>(scaled[i]));
  }
}

TEST(TensorDataGenerate, IndicesAreUniformInTheirBoundAndSeeded) {
  const size_t n = 100000;
  std::vector<double> a(n), b(n);
  std::vector<int32_t> ea(n), eb(n);
  generate_indices(7, DType::kI32, 42, n, a.data(), ea.data());
  generate_indices(7, DType::kI32, 42, n, b.data(), eb.data());
  EXPECT_EQ(a, b);
  std::vector<size_t> counts(7, 0);
  for (size_t i = 0; i < n; ++i) {
    ASSERT_GE(ea[i], 0);
    ASSERT_LT(ea[i], 7);
    ASSERT_EQ(static_cast<double>(ea[i]), a[i]);
    ++counts[ea[i]];
  }
  for (size_t c : counts) EXPECT_NEAR(static_cast<double>(c), n / 7.0, n / 7.0 * 0.05);
  generate_indices(7, DType::kI32, 43, n, b.data(), eb.data());
  EXPECT_NE(a, b);
  std::vector<double> one(5);
  std::vector<int64_t> e64(5);
  generate_indices(1, DType::kI64, 1, 5, one.data(), e64.data());
  for (int64_t v : e64) EXPECT_EQ(v, 0);
}

TEST(TensorDataChecksum, EverySingleBitFlipChangesIt) {
  std::vector<unsigned char> buf(131);
  for (size_t i = 0; i < buf.size(); ++i) buf[i] = static_cast<unsigned char>(i * 37 + 11);
  for (size_t len = 0; len <= buf.size(); ++len) {
    const uint64_t base = checksum(buf.data(), len);
    ASSERT_EQ(base, checksum(buf.data(), len));
    std::set<uint64_t> seen{base};
    for (size_t bit = 0; bit < len * 8; ++bit) {
      buf[bit / 8] ^= static_cast<unsigned char>(1u << (bit % 8));
      seen.insert(checksum(buf.data(), len));
      buf[bit / 8] ^= static_cast<unsigned char>(1u << (bit % 8));
    }
    EXPECT_EQ(seen.size(), len * 8 + 1) << "length " << len;
  }
  EXPECT_NE(checksum(buf.data(), 8), checksum(buf.data() + 1, 8));
  const std::vector<unsigned char> zeros(64, 0);
  EXPECT_NE(checksum(zeros.data(), 63), checksum(zeros.data(), 64));  // length counts
}

TEST(TensorDataSeedSource, RootIsReproducibleAndOsSeedsDiffer) {
  SeedSource a(42), b(42), c(43);
  std::set<uint64_t> seen;
  for (int i = 0; i < 1000; ++i) {
    const uint64_t x = a.next();
    EXPECT_EQ(x, b.next());
    EXPECT_NE(x, c.next());
    seen.insert(x);
  }
  EXPECT_EQ(seen.size(), 1000u);
  SeedSource os1, os2;
  EXPECT_NE(os1.next(), os2.next());
}

}  // namespace
}  // namespace kiln::eval
