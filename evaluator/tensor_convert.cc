// Dtype conversions of tensor_data.h: f16 and bf16 encoded by hand from double's bits (round to
// nearest even, subnormals, overflow to inf, quiet NaN), f32 through the float cast, integers
// rounded to nearest even and saturated.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

#include "evaluator/tensor_data.h"
#include "shared/status.h"

namespace kiln::eval {
namespace {

constexpr uint64_t kDoubleFracMask = (uint64_t{1} << 52) - 1;

// 2^k for k in double's normal exponent range, exactly.
constexpr double pow2(int k) {
  return std::bit_cast<double>(static_cast<uint64_t>(1023 + k) << 52);
}

// A binary floating-point format narrower than double, described by its field widths; templates so
// that every mask and shift below is a constant in the bulk loops.
template <int kExpBits, int kMantBits>
struct SmallFloat {
  static constexpr int kBias = (1 << (kExpBits - 1)) - 1;
  static constexpr uint32_t kExpMax = (1u << kExpBits) - 1;
  static constexpr uint64_t kInfBits = uint64_t{kExpMax} << kMantBits;
  static constexpr int kSignShift = kExpBits + kMantBits;
  static constexpr int kFracShift = 52 - kMantBits;  // fraction position in double vs. here

  // Rounds straight from double's bits. Going through float first would round twice: a double just
  // above a tie can land exactly on the tie in float and then round to even, the wrong way.
  // Branch-free apart from inf / NaN, because the rounding direction of random data is a coin toss
  // that a branch predictor loses half the time.
  static uint16_t encode(double v) {
    const uint64_t bits = std::bit_cast<uint64_t>(v);
    const auto sign = static_cast<uint16_t>((bits >> 63) << kSignShift);
    const uint64_t abs_bits = bits & ~(uint64_t{1} << 63);
    if (abs_bits >= uint64_t{0x7FF} << 52) {
      if (abs_bits == uint64_t{0x7FF} << 52) return static_cast<uint16_t>(sign | kInfBits);
      // NaN: keep the payload's top bits and set the quiet bit, so the result is never a signalling
      // NaN and never collapses to infinity (an all-zero payload).
      const uint64_t payload = (abs_bits & kDoubleFracMask) >> kFracShift;
      return static_cast<uint16_t>(sign | kInfBits | (uint64_t{1} << (kMantBits - 1)) | payload);
    }
    const int target_exp = static_cast<int>(abs_bits >> 52) - 1023 + kBias;
    // Bits of the 53-bit significand to drop: a normal result keeps kMantBits of fraction; a
    // subnormal one loses one more per step its exponent lies below 1. From 54 on everything rounds
    // to zero, and capping at 63 keeps that true (half > sig) without a branch. Zero and double
    // subnormals (exponent field 0) land there too.
    const int shift = std::min(63, kFracShift + std::max(0, 1 - target_exp));
    const uint64_t sig = (abs_bits & kDoubleFracMask) | (uint64_t{1} << 52);
    const uint64_t half = uint64_t{1} << (shift - 1);
    // Round half to even: add just under half, plus one more when the kept part is odd.
    const uint64_t q = (sig + (half - 1) + ((sig >> shift) & 1)) >> shift;
    // q still holds the implicit bit, so adding (exponent - 1) << kMantBits forms the exponent
    // field, and a carry out of the fraction (1.11..1 rounding up, or the largest subnormal
    // becoming the smallest normal) moves into it by itself; anything at or past inf is inf.
    const uint64_t out = (static_cast<uint64_t>(std::max(0, target_exp - 1)) << kMantBits) + q;
    return static_cast<uint16_t>(sign | std::min(out, kInfBits));
  }

  static double decode(uint16_t b) {
    const uint64_t sign = static_cast<uint64_t>(b >> kSignShift) << 63;
    const uint32_t exp_field = (b >> kMantBits) & kExpMax;
    const uint64_t frac = b & ((1u << kMantBits) - 1);
    if (exp_field == kExpMax) {  // inf or NaN; the quiet bit lands on double's quiet bit
      return std::bit_cast<double>(sign | (uint64_t{0x7FF} << 52) | (frac << kFracShift));
    }
    if (exp_field == 0) {  // zero or subnormal: frac units of 2^(1 - bias - mant_bits), exact
      const double m = static_cast<double>(frac) * pow2(1 - kBias - kMantBits);
      return sign != 0 ? -m : m;
    }
    const uint64_t e = exp_field - kBias + 1023;
    return std::bit_cast<double>(sign | (e << 52) | (frac << kFracShift));
  }
};
using Half = SmallFloat<5, 10>;
using Brain = SmallFloat<8, 7>;

// std::nearbyint rounds ties to even under the default rounding mode, which nothing in kiln changes
// (a caller that does so changes integer rounding here too).
int32_t to_i32(double v) {
  if (std::isnan(v)) return 0;
  const double r = std::nearbyint(v);
  if (r >= 2147483647.0) return std::numeric_limits<int32_t>::max();
  if (r <= -2147483648.0) return std::numeric_limits<int32_t>::min();
  return static_cast<int32_t>(r);
}

int64_t to_i64(double v) {
  if (std::isnan(v)) return 0;
  const double r = std::nearbyint(v);
  // 2^63 is the first double above INT64_MAX; -2^63 is exactly INT64_MIN.
  if (r >= 9223372036854775808.0) return std::numeric_limits<int64_t>::max();
  if (r <= -9223372036854775808.0) return std::numeric_limits<int64_t>::min();
  return static_cast<int64_t>(r);
}

// Buffers may be unaligned (sub-views of byte buffers), so elements move through memcpy, which
// compiles to a plain load or store.
template <typename Bits, typename Fn>
void encode_each(const double* in, size_t n, void* out, Fn fn) {
  auto* o = static_cast<unsigned char*>(out);
  for (size_t i = 0; i < n; ++i) {
    const Bits b = fn(in[i]);
    std::memcpy(o + i * sizeof(Bits), &b, sizeof(Bits));
  }
}

template <typename Bits, typename Fn>
void decode_each(const void* in, size_t n, double* out, Fn fn) {
  const auto* p = static_cast<const unsigned char*>(in);
  for (size_t i = 0; i < n; ++i) {
    Bits b;
    std::memcpy(&b, p + i * sizeof(Bits), sizeof(Bits));
    out[i] = fn(b);
  }
}

}  // namespace

double round_to(DType t, double v) {
  switch (t) {
    case DType::kF16: return Half::decode(Half::encode(v));
    case DType::kBF16: return Brain::decode(Brain::encode(v));
    // A double outside float's range becomes +-inf (IEEE conversion, which GCC and Clang follow).
    case DType::kF32: return static_cast<float>(v);
    case DType::kF64: return v;
    case DType::kI32: return to_i32(v);
    case DType::kI64: return static_cast<double>(to_i64(v));
  }
  KILN_CHECK(false, "round_to: unknown dtype");
}

void encode(DType t, const double* values, size_t n, void* out) {
  if (n == 0) return;
  KILN_CHECK(values != nullptr && out != nullptr, "encode: null buffer");
  switch (t) {
    case DType::kF16:
      return encode_each<uint16_t>(values, n, out, [](double v) { return Half::encode(v); });
    case DType::kBF16:
      return encode_each<uint16_t>(values, n, out, [](double v) { return Brain::encode(v); });
    case DType::kF32:
      return encode_each<float>(values, n, out, [](double v) { return static_cast<float>(v); });
    case DType::kF64: std::memcpy(out, values, n * sizeof(double)); return;
    case DType::kI32:
      return encode_each<int32_t>(values, n, out, [](double v) { return to_i32(v); });
    case DType::kI64:
      return encode_each<int64_t>(values, n, out, [](double v) { return to_i64(v); });
  }
  KILN_CHECK(false, "encode: unknown dtype");
}

void decode(DType t, const void* in, size_t n, double* out) {
  if (n == 0) return;
  KILN_CHECK(in != nullptr && out != nullptr, "decode: null buffer");
  switch (t) {
    case DType::kF16:
      return decode_each<uint16_t>(in, n, out, [](uint16_t b) { return Half::decode(b); });
    case DType::kBF16:
      return decode_each<uint16_t>(in, n, out, [](uint16_t b) { return Brain::decode(b); });
    case DType::kF32:
      return decode_each<float>(in, n, out, [](float v) { return static_cast<double>(v); });
    case DType::kF64: std::memcpy(out, in, n * sizeof(double)); return;
    case DType::kI32:
      return decode_each<int32_t>(in, n, out, [](int32_t v) { return static_cast<double>(v); });
    case DType::kI64:
      return decode_each<int64_t>(in, n, out, [](int64_t v) { return static_cast<double>(v); });
  }
  KILN_CHECK(false, "decode: unknown dtype");
}

}  // namespace kiln::eval
