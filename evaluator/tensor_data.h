// Input generation, dtype encoding and output comparison for verification. Values are generated
// in double, rounded to what the dtype can hold, and encoded; the reference sees the rounded
// values, so candidate and reference compute on exactly the same inputs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "shared/dtype.h"
#include "shared/target_spec.h"

namespace kiln::eval {

// Input distributions (docs/threats.md row 4: several, so a constant or analytic answer fitted to
// one cannot pass). Magnitudes are chosen per dtype so that values stay representable. Integer
// dtypes scale by 1e2 (kLargeMagnitude 1e4, kSmallMagnitude 1) before rounding, so that most values
// are not 0; their kSpecial infinities saturate and NaN becomes 0.
enum class Distribution {
  kNormal,          // N(0, 1)
  kUniform,         // U(-1, 1)
  kLargeMagnitude,  // N(0, 1) scaled to ~1e2 (f16) / ~1e4 (bf16, f32)
  kSmallMagnitude,  // N(0, 1) scaled to ~1e-3 (f16) / ~1e-6 (bf16, f32)
  kMixedScale,      // each value N(0,1) times 2^k, k uniform in [-8, 8]
  kAllEqual,        // every element the same random value
  kZeros,           // all zeros (edge case only; never used for timing)
  kSpecial,         // normal, with ~0.1% of elements +Inf, -Inf or NaN
};
std::string_view distribution_name(Distribution d);

// Rounds `v` to the nearest value representable in `t` (round to nearest even; overflow -> inf).
double round_to(DType t, double v);

// Encodes n doubles into `t`'s bit layout (f16 / bf16 / f32 / f64 / i32 / i64), and back.
void encode(DType t, const double* values, size_t n, void* out);
void decode(DType t, const void* in, size_t n, double* out);

// Draws n values of `d` from `seed` (deterministic for a given seed, independent of thread
// count), rounded to `t`, into `values` (double) and `encoded` (n * dtype_bytes(t) bytes).
// Large n is generated in parallel. `scale` multiplies every value before rounding (a target's
// per-input scale, e.g. 1/sqrt(fan-in) for weights).
void generate(Distribution d, DType t, uint64_t seed, size_t n, double* values, void* encoded,
              double scale = 1.0);

// Index inputs (an argument with index_bound, e.g. class labels): n integers uniform in
// [0, bound), whatever the distribution of the other inputs, deterministic for a given seed.
void generate_indices(int64_t bound, DType t, uint64_t seed, size_t n, double* values,
                      void* encoded);

// The value generate() puts at `index` (for any n > index), computed on its own.
double sample_at(Distribution d, DType t, uint64_t seed, size_t index);

// Compares a candidate's encoded output with the reference (double, not yet rounded): the
// reference is rounded to `t` first, then |out - ref| <= tol.abs + tol.rel * |ref| per element.
// NaN in the reference must be NaN in the output; infinities must match in sign. A tolerance with
// an rms term compares with effective_tolerance(tol, reference, n). Elements whose
// bytes all equal `poison_byte` count as unwritten (docs/threats.md row 1). Hazard: an output that
// legitimately equals the pattern (-1 in an integer under 0xFF, a -NaN f16 under 0xFF) also counts
// as unwritten; callers re-run with a second poison byte before blaming the candidate.
struct CompareResult {
  bool passed = false;
  size_t elements = 0;
  size_t mismatches = 0;       // elements outside tolerance (unwritten ones included)
  size_t unwritten = 0;        // elements still holding the poison pattern
  size_t first_bad = 0;        // index of the first mismatch (valid when mismatches > 0)
  double worst_abs_error = 0;  // over finite elements
  double worst_rel_error = 0;  // |out - ref| / max(|ref|, tiny), over finite elements; tiny is
                               // the dtype's smallest normal (1 for integers)
  double rms_error = 0;        // root mean square of |out - ref| over finite elements
  std::string detail;          // "y[1234]: got 0.51, expected 0.49 (tolerance ...)" or ""
};
// `term_norms` (n values, or null) serves a tolerance with a terms term: element i's abs grows by
// tol.terms * term_norms[i] (a non-finite or negative norm adds nothing), see term_norms below.
CompareResult compare(DType t, const void* candidate, const double* reference, size_t n,
                      const Tolerance& tol, unsigned char poison_byte, std::string_view name,
                      const double* term_norms = nullptr);

// Turns the reference's outputs on the squared inputs (R(x*x), element-wise, in place) into the
// norms compare() scales a terms tolerance by: sqrt(|value|) each.
void term_norms_from_squares(double* values, size_t n);

// The root mean square of the finite values among n (0 when there are none).
double finite_rms(const double* values, size_t n);

// `given` with its rms term folded into abs: abs + rms * finite_rms(reference) (rms becomes 0).
Tolerance effective_tolerance(const Tolerance& given, const double* reference, size_t n);

// Fast 64-bit content checksum (inputs unchanged by the candidate, docs/threats.md row 2).
uint64_t checksum(const void* data, size_t bytes);

// Seeds the evaluator draws per trial (docs/threats.md: never passed to the candidate): a
// SplitMix64 stream over a process-private root seed from the OS entropy source.
class SeedSource {
 public:
  SeedSource();                                  // seeded from getrandom()
  explicit SeedSource(uint64_t root) : state_(root) {}  // for reproducible tests
  uint64_t next();

 private:
  uint64_t state_;
};

}  // namespace kiln::eval
