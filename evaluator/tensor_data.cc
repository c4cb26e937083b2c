// Input generation, output comparison, checksums and trial seeds of tensor_data.h. Generation and
// comparison split large tensors over std::threads; no result depends on the thread count.
#include "evaluator/tensor_data.h"

#include <sys/random.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <system_error>
#include <thread>
#include <vector>

#include "shared/status.h"

namespace kiln::eval {
namespace {

constexpr uint64_t kGamma = 0x9E3779B97F4A7C15;  // SplitMix64's increment: odd, 2^64 / golden ratio
// Below this many elements one thread does the work: starting threads would cost more than they
// save (a verification case of 2^20 elements took ~40 ms on one thread).
constexpr size_t kParallelMin = size_t{1} << 16;
constexpr unsigned kMaxThreads = 16;
constexpr size_t kBlock = 2048;  // elements per block: scratch buffers stay in L1 / L2
constexpr double kTwoPi = 6.283185307179586;

// SplitMix64's output function: a bijection on 64-bit words with full avalanche.
uint64_t mix64(uint64_t x) {
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EB;
  return x ^ (x >> 31);
}

// Counter-based draws: word `counter` of the stream `key` is SplitMix64's output at that step, so
// any element can be computed on its own, by any thread, in any order. Hazard: two keys whose
// difference is a small multiple of kGamma give shifted copies of one stream; keys come out of
// mix64, so for tensors of 2^26 elements that has odds of about 2^-37 per pair of seeds.
uint64_t draw(uint64_t key, uint64_t counter) { return mix64(key + counter * kGamma); }

double uniform01(uint64_t key, uint64_t counter) {  // [0, 1), 53 bits
  return static_cast<double>(draw(key, counter) >> 11) * 0x1p-53;
}

// Box–Muller on the uniforms at counters 2j and 2j+1: two independent N(0, 1) values, used by
// elements 2j and 2j+1.
void normal_pair(uint64_t key, uint64_t j, double* z0, double* z1) {
  // u1 in (0, 1], so log(u1) is finite.
  const double u1 = static_cast<double>((draw(key, 2 * j) >> 11) + 1) * 0x1p-53;
  const double theta = kTwoPi * uniform01(key, 2 * j + 1);
  const double r = std::sqrt(-2.0 * std::log(u1));
  *z0 = r * std::cos(theta);
  *z1 = r * std::sin(theta);
}

// Everything one (distribution, dtype, seed) needs; elements are functions of (Plan, index).
struct Plan {
  Distribution dist;
  uint64_t key;      // uniforms and Box–Muller pairs
  uint64_t aux_key;  // per-element choices: kMixedScale's exponent, kSpecial's replacements
  double scale;      // magnitude for the dtype
  double constant;   // kAllEqual's value
};

double magnitude(Distribution d, DType t) {
  const bool is_int = !dtype_is_float(t);
  switch (d) {
    case Distribution::kLargeMagnitude:
      return t == DType::kF16 ? 1e2 : 1e4;
    case Distribution::kSmallMagnitude:
      return is_int ? 1.0 : t == DType::kF16 ? 1e-3 : 1e-6;
    default:
      return is_int ? 1e2 : 1.0;
  }
}

Plan make_plan(Distribution d, DType t, uint64_t seed) {
  Plan p{d, 0, 0, magnitude(d, t), 0};
  p.key = mix64(mix64(seed) + static_cast<uint64_t>(d));  // distributions of one seed differ
  p.aux_key = mix64(p.key ^ 0x5851F42D4C957F2D);
  double z1 = 0;
  normal_pair(p.aux_key, 0, &p.constant, &z1);
  p.constant *= p.scale;
  return p;
}

// Turns the N(0, 1) draw `z` of element i into the distribution's value (before rounding).
double shape_normal(const Plan& p, size_t i, double z) {
  if (p.dist == Distribution::kMixedScale) {
    const int k = static_cast<int>(draw(p.aux_key, i) % 17) - 8;  // uniform in [-8, 8]
    return z * p.scale * std::bit_cast<double>(static_cast<uint64_t>(1023 + k) << 52);
  }
  if (p.dist == Distribution::kSpecial) {
    const uint64_t h = draw(p.aux_key, i);
    if ((h >> 54) == 0) {  // 1 in 1024 elements
      constexpr double kInf = std::numeric_limits<double>::infinity();
      switch (h % 3) {
        case 0:
          return kInf;
        case 1:
          return -kInf;
        default:
          return std::numeric_limits<double>::quiet_NaN();
      }
    }
  }
  return z * p.scale;
}

double raw_value(const Plan& p, size_t i) {
  switch (p.dist) {
    case Distribution::kZeros:
      return 0.0;
    case Distribution::kAllEqual:
      return p.constant;
    case Distribution::kUniform:
      return (2.0 * uniform01(p.key, i) - 1.0) * p.scale;
    default: {
      double z0 = 0, z1 = 0;
      normal_pair(p.key, i / 2, &z0, &z1);
      return shape_normal(p, i, (i & 1) != 0 ? z1 : z0);
    }
  }
}

// Elements [b, e) into out[0, e - b): the same values as raw_value, with one Box–Muller per pair.
void fill_raw(const Plan& p, size_t b, size_t e, double* out) {
  switch (p.dist) {
    case Distribution::kZeros:
      std::fill(out, out + (e - b), 0.0);
      return;
    case Distribution::kAllEqual:
      std::fill(out, out + (e - b), p.constant);
      return;
    case Distribution::kUniform:
      for (size_t i = b; i < e; ++i) out[i - b] = (2.0 * uniform01(p.key, i) - 1.0) * p.scale;
      return;
    default:
      break;
  }
  double z0 = 0, z1 = 0;
  size_t i = b;
  if ((i & 1) != 0) {
    normal_pair(p.key, i / 2, &z0, &z1);
    out[0] = shape_normal(p, i, z1);
    ++i;
  }
  for (; i + 1 < e; i += 2) {
    normal_pair(p.key, i / 2, &z0, &z1);
    out[i - b] = shape_normal(p, i, z0);
    out[i + 1 - b] = shape_normal(p, i + 1, z1);
  }
  if (i < e) {
    normal_pair(p.key, i / 2, &z0, &z1);
    out[i - b] = shape_normal(p, i, z0);
  }
}

unsigned range_count(size_t n) {
  if (n <= kParallelMin) return 1;
  const unsigned hw = std::max(1u, std::thread::hardware_concurrency());
  return std::min(hw, kMaxThreads);
}

// Calls fn(r, begin, end) for `count` contiguous ranges covering [0, n), range 0 on the calling
// thread; returns when all are done. Range starts are even, so Box–Muller pairs are not split.
template <typename Fn>
void for_ranges(size_t n, unsigned count, const Fn& fn) {
  const size_t per = (n / count + 1) & ~size_t{1};
  auto bounds = [&](unsigned r, size_t* b, size_t* e) {
    *b = std::min(n, r * per);
    *e = r + 1 == count ? n : std::min(n, (r + 1) * per);
  };
  std::vector<std::thread> threads;
  threads.reserve(count);
  for (unsigned r = 1; r < count; ++r) {
    size_t b = 0, e = 0;
    bounds(r, &b, &e);
    try {
      threads.emplace_back([&fn, r, b, e] { fn(r, b, e); });
    } catch (const std::system_error&) {
      fn(r, b, e);  // no thread to be had (limits): do the range here; the result is the same
    }
  }
  size_t b = 0, e = 0;
  bounds(0, &b, &e);
  fn(0, b, e);
  for (std::thread& t : threads) t.join();
}

// --- comparison ---

enum class Verdict { kOk, kOutside, kNanLost, kInfMismatch, kNotFinite };

Verdict judge(double got, double ref, const Tolerance& tol) {
  if (std::isnan(ref)) return std::isnan(got) ? Verdict::kOk : Verdict::kNanLost;
  if (std::isinf(ref)) return got == ref ? Verdict::kOk : Verdict::kInfMismatch;
  if (!std::isfinite(got)) return Verdict::kNotFinite;
  // Written so that a NaN tolerance fails rather than passes.
  return std::fabs(got - ref) <= tol.abs + tol.rel * std::fabs(ref) ? Verdict::kOk
                                                                    : Verdict::kOutside;
}

bool is_poison(const unsigned char* element, size_t bytes, unsigned char poison) {
  for (size_t k = 0; k < bytes; ++k) {
    if (element[k] != poison) return false;
  }
  return true;
}

double smallest_normal(DType t) {
  switch (t) {
    case DType::kF16:
      return 0x1p-14;
    case DType::kBF16:
    case DType::kF32:
      return 0x1p-126;
    case DType::kF64:
      return std::numeric_limits<double>::min();
    default:
      return 1.0;
  }
}

struct Tally {
  size_t mismatches = 0;
  size_t unwritten = 0;
  size_t first_bad = std::numeric_limits<size_t>::max();
  double worst_abs = 0;
  double worst_rel = 0;
  double sum_sq = 0;  // squared errors over finite elements
  size_t finite = 0;
};

// The absolute tolerance of element i: `tol`'s abs (its rms term already folded in) plus its
// terms term.
double element_abs(const Tolerance& tol, const double* term_norms, size_t i) {
  if (term_norms == nullptr || !(tol.terms > 0)) return tol.abs;
  const double norm = term_norms[i];
  return std::isfinite(norm) && norm > 0 ? tol.abs + tol.terms * norm : tol.abs;
}

void tally_range(DType t, const unsigned char* cand, const double* reference,
                 const double* term_norms, size_t b, size_t e, const Tolerance& given,
                 unsigned char poison, Tally* out) {
  const size_t sz = dtype_bytes(t);
  const double tiny = smallest_normal(t);
  double got[kBlock], ref[kBlock];
  unsigned char scratch[kBlock * sizeof(double)];
  Tally tl;
  Tolerance tol = given;  // its abs set per element below
  for (size_t bb = b; bb < e; bb += kBlock) {
    const size_t len = std::min(e, bb + kBlock) - bb;
    decode(t, cand + bb * sz, len, got);
    encode(t, reference + bb, len, scratch);  // the reference rounded to t
    decode(t, scratch, len, ref);
    for (size_t k = 0; k < len; ++k) {
      const size_t i = bb + k;
      tol.abs = element_abs(given, term_norms, i);
      Verdict v = Verdict::kOk;
      if (is_poison(cand + i * sz, sz, poison)) {
        ++tl.unwritten;
        v = Verdict::kOutside;
      } else {
        v = judge(got[k], ref[k], tol);
        // A finite reference that rounds to infinity sits at the overflow boundary: a kernel
        // that rounds its last step the other way gives the largest finite value of the same
        // sign, within the tolerance of the exact value (f16: -65520.02 rounds to -inf, an honest
        // f32-accumulating GEMM stores -65504).
        if (v == Verdict::kInfMismatch && std::isfinite(reference[i]) && std::isfinite(got[k]) &&
            (got[k] < 0) == (reference[i] < 0) &&
            std::fabs(got[k] - reference[i]) <= tol.abs + tol.rel * std::fabs(reference[i])) {
          v = Verdict::kOk;
        }
        // And the other way: a finite reference within the tolerance of the overflow boundary
        // (f16: -65519.98 rounds to -65504) where the kernel's own rounding went past it (its f32
        // sum reached -65520.01 and stored -inf). Accepted when a value the tolerance allows
        // rounds to that same infinity.
        if (v == Verdict::kNotFinite && std::isinf(got[k]) && std::isfinite(reference[i]) &&
            (got[k] < 0) == (reference[i] < 0)) {
          const double slack = tol.abs + tol.rel * std::fabs(reference[i]);
          if (round_to(t, reference[i] + std::copysign(slack, reference[i])) == got[k]) {
            v = Verdict::kOk;
          }
        }
        if (std::isfinite(got[k]) && std::isfinite(ref[k])) {
          const double err = std::fabs(got[k] - ref[k]);
          tl.worst_abs = std::max(tl.worst_abs, err);
          tl.sum_sq += err * err;
          ++tl.finite;
          tl.worst_rel = std::max(tl.worst_rel, err / std::max(std::fabs(ref[k]), tiny));
        }
      }
      if (v != Verdict::kOk) {
        ++tl.mismatches;
        if (tl.first_bad > i) tl.first_bad = i;
      }
    }
  }
  *out = tl;
}

std::string number(DType t, double v) {
  char buf[40];
  std::snprintf(buf, sizeof(buf), t == DType::kF64 || t == DType::kI64 ? "%.17g" : "%.9g", v);
  return buf;
}

std::string describe_bad(DType t, const unsigned char* cand, const double* reference,
                         const double* term_norms, size_t i, const Tolerance& given,
                         unsigned char poison, std::string_view name) {
  Tolerance tol = given;
  tol.abs = element_abs(given, term_norms, i);
  const size_t sz = dtype_bytes(t);
  std::string s = std::string(name) + "[" + std::to_string(i) + "]: ";
  if (is_poison(cand + i * sz, sz, poison)) return s + "unwritten (still holds the poison pattern)";
  double got = 0;
  decode(t, cand + i * sz, 1, &got);
  const double ref = round_to(t, reference[i]);
  s += "got " + number(t, got) + ", expected " + number(t, ref);
  if (std::bit_cast<uint64_t>(ref) != std::bit_cast<uint64_t>(reference[i]) && !std::isnan(ref)) {
    s += " (" + number(DType::kF64, reference[i]) + " before rounding to " +
         std::string(dtype_name(t)) + ")";
  }
  std::string limit = "tolerance abs " + number(DType::kF32, tol.abs);
  if (tol.abs != given.abs) {
    limit += " (" + number(DType::kF32, given.abs) + " + terms " +
             number(DType::kF32, given.terms) + " * " + number(DType::kF32, term_norms[i]) +
             ", the root of the summed squared terms)";
  }
  limit += " + rel " + number(DType::kF32, tol.rel) + " * |expected|";
  switch (judge(got, ref, tol)) {
    case Verdict::kOutside:
      return s + " (error " + number(t, std::fabs(got - ref)) + " > " + limit + " = " +
             number(t, tol.abs + tol.rel * std::fabs(ref)) + ")";
    case Verdict::kNanLost:
      return s + " (a NaN must stay NaN; " + limit + ")";
    case Verdict::kInfMismatch:
      return s + " (an infinity must match in sign; " + limit + ")";
    case Verdict::kNotFinite:
      return s + " (non-finite where a finite value is expected; " + limit + ")";
    case Verdict::kOk:
      break;
  }
  return s + " (passes on re-check: the buffer changed during the comparison)";
}

}  // namespace

std::string_view distribution_name(Distribution d) {
  switch (d) {
    case Distribution::kNormal:
      return "normal";
    case Distribution::kUniform:
      return "uniform";
    case Distribution::kLargeMagnitude:
      return "large_magnitude";
    case Distribution::kSmallMagnitude:
      return "small_magnitude";
    case Distribution::kMixedScale:
      return "mixed_scale";
    case Distribution::kAllEqual:
      return "all_equal";
    case Distribution::kZeros:
      return "zeros";
    case Distribution::kSpecial:
      return "special";
  }
  return "?";
}

void generate(Distribution d, DType t, uint64_t seed, size_t n, double* values, void* encoded,
              double scale) {
  if (n == 0) return;
  KILN_CHECK(values != nullptr && encoded != nullptr, "generate: null buffer");
  const Plan p = make_plan(d, t, seed);
  auto* enc = static_cast<unsigned char*>(encoded);
  const size_t sz = dtype_bytes(t);
  for_ranges(n, range_count(n), [&](unsigned, size_t begin, size_t end) {
    for (size_t b = begin; b < end; b += kBlock) {
      const size_t len = std::min(end, b + kBlock) - b;
      fill_raw(p, b, b + len, values + b);
      if (scale != 1.0) {
        for (size_t i = b; i < b + len; ++i) values[i] *= scale;
      }
      encode(t, values + b, len, enc + b * sz);
      decode(t, enc + b * sz, len, values + b);  // values are exactly what the encoding holds
    }
  });
}

void generate_indices(int64_t bound, DType t, uint64_t seed, size_t n, double* values,
                      void* encoded) {
  if (n == 0) return;
  KILN_CHECK(values != nullptr && encoded != nullptr, "generate_indices: null buffer");
  KILN_CHECK(bound > 0, "generate_indices: the bound must be positive");
  const uint64_t key = mix64(seed ^ 0x1D8E4E27C47D124Full);
  auto* enc = static_cast<unsigned char*>(encoded);
  const size_t sz = dtype_bytes(t);
  for_ranges(n, range_count(n), [&](unsigned, size_t begin, size_t end) {
    for (size_t i = begin; i < end; ++i) {
      values[i] = static_cast<double>(draw(key, i) % static_cast<uint64_t>(bound));
    }
    encode(t, values + begin, end - begin, enc + begin * sz);
  });
}

double sample_at(Distribution d, DType t, uint64_t seed, size_t index) {
  return round_to(t, raw_value(make_plan(d, t, seed), index));
}

double finite_rms(const double* values, size_t n) {
  if (n == 0) return 0;
  const unsigned count = range_count(n);
  std::vector<double> sums(count, 0.0);
  std::vector<size_t> finite(count, 0);
  for_ranges(n, count, [&](unsigned r, size_t b, size_t e) {
    for (size_t i = b; i < e; ++i) {
      if (!std::isfinite(values[i])) continue;
      sums[r] += values[i] * values[i];
      ++finite[r];
    }
  });
  double sum = 0;  // merged in range order: the same result for any thread count
  size_t k = 0;
  for (unsigned r = 0; r < count; ++r) {
    sum += sums[r];
    k += finite[r];
  }
  return k == 0 ? 0.0 : std::sqrt(sum / static_cast<double>(k));
}

Tolerance effective_tolerance(const Tolerance& given, const double* reference, size_t n) {
  Tolerance t = given;
  if (given.rms > 0) t.abs += given.rms * finite_rms(reference, n);
  t.rms = 0;
  return t;
}

void term_norms_from_squares(double* values, size_t n) {
  for_ranges(n, range_count(n), [&](unsigned, size_t b, size_t e) {
    for (size_t i = b; i < e; ++i) values[i] = std::sqrt(std::fabs(values[i]));
  });
}

CompareResult compare(DType t, const void* candidate, const double* reference, size_t n,
                      const Tolerance& given, unsigned char poison_byte, std::string_view name,
                      const double* term_norms) {
  CompareResult res;
  res.elements = n;
  if (n == 0) {
    res.passed = true;
    return res;
  }
  KILN_CHECK(candidate != nullptr && reference != nullptr, "compare: null buffer");
  const auto* cand = static_cast<const unsigned char*>(candidate);
  const unsigned count = range_count(n);
  const Tolerance tol = effective_tolerance(given, reference, n);
  std::vector<Tally> tallies(count);
  for_ranges(n, count, [&](unsigned r, size_t b, size_t e) {
    tally_range(t, cand, reference, term_norms, b, e, tol, poison_byte, &tallies[r]);
  });
  // Merged in range order with min / max / sums only: the same result for any thread count.
  size_t first_bad = std::numeric_limits<size_t>::max();
  double sum_sq = 0;
  size_t finite = 0;
  for (const Tally& tl : tallies) {
    sum_sq += tl.sum_sq;
    finite += tl.finite;
    res.mismatches += tl.mismatches;
    res.unwritten += tl.unwritten;
    first_bad = std::min(first_bad, tl.first_bad);
    res.worst_abs_error = std::max(res.worst_abs_error, tl.worst_abs);
    res.worst_rel_error = std::max(res.worst_rel_error, tl.worst_rel);
  }
  res.rms_error = finite > 0 ? std::sqrt(sum_sq / static_cast<double>(finite)) : 0;
  res.passed = res.mismatches == 0;
  if (!res.passed) {
    res.first_bad = first_bad;
    res.detail = describe_bad(t, cand, reference, term_norms, first_bad, tol, poison_byte, name) +
                 "; " + std::to_string(res.mismatches) + " of " + std::to_string(n) +
                 " elements bad, " + std::to_string(res.unwritten) + " unwritten";
  }
  return res;
}

// Four independent lanes hide the multiply's latency. Each step is a bijection of the lane for a
// fixed word and of the word for a fixed lane, and the final fold is a bijection of each lane given
// the others, so a change to one word (a single bit flip, say) always changes the result. The
// xor-shift carries the product's high bits down: with a rotation instead, a flip of a word's top
// bit and a flip in the lane's next word could cancel, so two-bit corruptions went unseen.
uint64_t checksum(const void* data, size_t bytes) {
  constexpr uint64_t kMul = 0xC2B2AE3D27D4EB4F;
  auto step = [](uint64_t lane, uint64_t word) {
    const uint64_t x = (lane ^ word) * kMul;
    return x ^ (x >> 32);
  };
  auto load = [](const unsigned char* p) {
    uint64_t w;
    std::memcpy(&w, p, sizeof(w));
    return w;
  };
  const auto* p = static_cast<const unsigned char*>(data);
  uint64_t lane[4] = {kGamma, kGamma * 3, kGamma * 5, kGamma * 7};
  size_t i = 0;
  for (; i + 32 <= bytes; i += 32) {
    lane[0] = step(lane[0], load(p + i));
    lane[1] = step(lane[1], load(p + i + 8));
    lane[2] = step(lane[2], load(p + i + 16));
    lane[3] = step(lane[3], load(p + i + 24));
  }
  int k = 0;
  for (; i + 8 <= bytes; i += 8, ++k) lane[k] = step(lane[k], load(p + i));
  if (i < bytes) {  // k <= 3 here: at most three whole words precede the partial one
    uint64_t w = 0;
    std::memcpy(&w, p + i, bytes - i);
    lane[k] = step(lane[k], w);
  }
  uint64_t h = mix64(bytes);
  for (uint64_t l : lane) h = mix64(h ^ l);
  return h;
}

SeedSource::SeedSource() : state_(0) {
  auto* p = reinterpret_cast<unsigned char*>(&state_);
  size_t got = 0;
  while (got < sizeof(state_)) {
    const ssize_t r = getrandom(p + got, sizeof(state_) - got, 0);
    if (r < 0 && errno == EINTR) continue;
    // No fallback: a guessable root would let a candidate predict its inputs
    // (docs/threats.md row 4).
    KILN_CHECK(r > 0, "getrandom() failed; the evaluator cannot draw unpredictable seeds");
    got += static_cast<size_t>(r);
  }
}

uint64_t SeedSource::next() {
  state_ += kGamma;
  return mix64(state_);
}

}  // namespace kiln::eval
