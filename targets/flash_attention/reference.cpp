// Trusted reference for attention, in fp64 on the host: for each (b, h) and query row i,
//   s_j = scale * <q_i, k_j> over the visible keys j (j <= i when causal, else all L keys),
//   m = max_j s_j (fmax: NaN scores are skipped), p_j = exp(s_j - m), o_i = sum_j p_j v_j / sum_j p_j.
// Masked keys are simply not visited, so they contribute exactly nothing. Special values follow
// this formula: a NaN or +Inf score makes the row NaN, a row whose visible scores are all -Inf
// (or NaN) is NaN (exp(-Inf - -Inf)), and 0 * Inf = NaN where p_j is 0 and v_j is infinite.
// Layout: q, k, v, o are [B, H, L, D] row-major. dims = {B, H, L, D, MASK}: MASK 2 = causal, any
// other value (1) = no mask (kiln's dims are positive, so the mode is 1/2, not 0/1); scalars = {scale}.
// Speed (the timed outputs at the benchmark shape are checked against it, ~1.7e10 multiply-adds
// when causal): scores are computed four keys at a time (four independent sums, each still summed
// over d in order), and GCC may vectorize the loops (-O2 alone does not).
#include <cmath>
#include <cstdint>
#include <vector>

#if defined(__GNUC__) && !defined(__clang__)
#define KILN_REF_FAST __attribute__((optimize("O3")))
#else
#define KILN_REF_FAST
#endif

namespace {

// Query row i of head bh into o; p has room for L scores.
KILN_REF_FAST void attend_row(const double* const* in, double* const* out, const int64_t* dims,
                              double scale, int64_t bh, int64_t i, double* p) {
  const int64_t L = dims[2], D = dims[3];
  const bool is_causal = dims[4] == 2;
  const double* q = in[0] + bh * L * D;
  const double* k = in[1] + bh * L * D;
  const double* v = in[2] + bh * L * D;
  double* o = out[0] + bh * L * D;
  const int64_t n = is_causal ? i + 1 : L;  // visible keys: 0 .. n-1
  double m = -INFINITY;
  const double* qi = q + i * D;
  int64_t j = 0;
  for (; j + 4 <= n; j += 4) {
    const double *k0 = k + j * D, *k1 = k0 + D, *k2 = k1 + D, *k3 = k2 + D;
    double d0 = 0, d1 = 0, d2 = 0, d3 = 0;
    for (int64_t d = 0; d < D; ++d) {
      d0 += qi[d] * k0[d];
      d1 += qi[d] * k1[d];
      d2 += qi[d] * k2[d];
      d3 += qi[d] * k3[d];
    }
    p[j] = scale * d0;
    p[j + 1] = scale * d1;
    p[j + 2] = scale * d2;
    p[j + 3] = scale * d3;
  }
  for (; j < n; ++j) {
    double dot = 0;
    for (int64_t d = 0; d < D; ++d) dot += qi[d] * k[j * D + d];
    p[j] = scale * dot;
  }
  for (j = 0; j < n; ++j) m = std::fmax(m, p[j]);
  double sum = 0;
  for (j = 0; j < n; ++j) {
    p[j] = std::exp(p[j] - m);
    sum += p[j];
  }
  double* oi = o + i * D;
  for (int64_t d = 0; d < D; ++d) oi[d] = 0;
  for (j = 0; j < n; ++j) {
    for (int64_t d = 0; d < D; ++d) oi[d] += p[j] * v[j * D + d];
  }
  for (int64_t d = 0; d < D; ++d) oi[d] /= sum;
}

}  // namespace

extern "C" void kiln_reference(const double* const* in, double* const* out, const int64_t* dims,
                               const double* scalars) {
  const int64_t B = dims[0], H = dims[1], L = dims[2];
  std::vector<double> p(L);
  for (int64_t bh = 0; bh < B * H; ++bh) {
    for (int64_t i = 0; i < L; ++i) attend_row(in, out, dims, scalars[0], bh, i, p.data());
  }
}

// Rows on demand (target.json's reference_rows is B, H, L): row r is query row r % L of head
// r / L. Rows are independent, so kiln may split them over threads.
extern "C" void kiln_reference_rows(const double* const* in, double* const* out,
                                    const int64_t* dims, const double* scalars, const int64_t* rows,
                                    int64_t nrows) {
  const int64_t L = dims[2];
  std::vector<double> p(L);
  for (int64_t r = 0; r < nrows; ++r)
    attend_row(in, out, dims, scalars[0], rows[r] / L, rows[r] % L, p.data());
}

// The size of the error an honest kernel's rounding can put in each element of the listed rows
// (kiln scales its tolerance's terms term by it; docs/targets.md, "Choosing tolerances"):
//   T_id = sum_j p_j |v_jd| + sum_j p_j |v_jd - o_id| * a_j,   a_j = scale * sum_e |q_ie k_je|,
// with p the row's softmax. The first sum bounds the rounding of o_i = sum_j p_j v_j; the second
// is how far o_i moves when each score moves by its own rounding (relative to a_j): small where
// one key dominates, large where the softmax is nearly tied between keys of different values, as
// it is at large magnitudes (scores ~1e7 apart by chance only a few units), where an honest fp32
// kernel and the fp64 reference may weigh the tied keys differently.
extern "C" void kiln_reference_terms(const double* const* in, double* const* out,
                                     const int64_t* dims, const double* scalars,
                                     const int64_t* rows, int64_t nrows) {
  const int64_t L = dims[2], D = dims[3];
  const bool is_causal = dims[4] == 2;
  const double scale = scalars[0];
  std::vector<double> s(L), a(L), o(D);
  for (int64_t r = 0; r < nrows; ++r) {
    const int64_t bh = rows[r] / L, i = rows[r] % L;
    const double* qi = in[0] + (bh * L + i) * D;
    const double* k = in[1] + bh * L * D;
    const double* v = in[2] + bh * L * D;
    double* t = out[0] + (bh * L + i) * D;
    const int64_t n = is_causal ? i + 1 : L;
    double m = -INFINITY;
    for (int64_t j = 0; j < n; ++j) {
      double dot = 0, mag = 0;
      for (int64_t e = 0; e < D; ++e) {
        dot += qi[e] * k[j * D + e];
        mag += std::fabs(qi[e] * k[j * D + e]);
      }
      s[j] = scale * dot;
      a[j] = std::fabs(scale) * mag;
      m = std::fmax(m, s[j]);
    }
    double sum = 0;
    for (int64_t j = 0; j < n; ++j) {
      s[j] = std::exp(s[j] - m);  // now p_j unnormalized
      sum += s[j];
    }
    for (int64_t d = 0; d < D; ++d) o[d] = 0;
    for (int64_t j = 0; j < n; ++j) {
      for (int64_t d = 0; d < D; ++d) o[d] += s[j] / sum * v[j * D + d];
    }
    for (int64_t d = 0; d < D; ++d) {
      double terms = 0, moved = 0;
      for (int64_t j = 0; j < n; ++j) {
        const double p = s[j] / sum, vj = v[j * D + d];
        terms += p * std::fabs(vj);
        moved += p * std::fabs(vj - o[d]) * a[j];
      }
      t[d] = terms + moved;
    }
  }
}
