// Trusted reference for the matmul target: C[M,N] = A[M,K] @ B[K,N], all row-major, in fp64.
// Blocked for the cache (it must finish the 4096^3 benchmark shape: about 12-25 s on one core):
// for each block of KB rows of B and JB columns, the block is copied into 4-column strips stored
// k-contiguously (`panel`), and C is accumulated in 4x4 register tiles over the block's k range
// (two-wide double vectors, GCC vector extension: plain SSE2/NEON). Rows and columns that do not
// fill a 4x4 tile take a plain dot-product loop. Every product and sum is an IEEE double
// operation (no fast-math), so Inf and NaN propagate as they should (Inf * 0 = NaN,
// Inf + -Inf = NaN); only the order of the additions differs from a textbook triple loop.
#include <cstdint>
#include <cstring>
#include <vector>

namespace {
typedef double v2d __attribute__((vector_size(16)));
inline v2d load2(const double* p) {
  v2d v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}
inline void store2(double* p, v2d v) { std::memcpy(p, &v, sizeof(v)); }
}  // namespace

extern "C" void kiln_reference(const double* const* in, double* const* out, const int64_t* dims,
                               const double* /*scalars*/) {
  const double* A = in[0];
  const double* B = in[1];
  double* C = out[0];
  const int64_t M = dims[0], N = dims[1], K = dims[2];
  for (int64_t i = 0; i < M * N; ++i) C[i] = 0.0;
  const int64_t KB = 256, JB = 512;
  std::vector<double> panel(KB * JB);
  for (int64_t k0 = 0; k0 < K; k0 += KB) {
    const int64_t kn = (k0 + KB < K ? k0 + KB : K) - k0;  // k rows in this block
    for (int64_t j0 = 0; j0 < N; j0 += JB) {
      const int64_t jn = (j0 + JB < N ? j0 + JB : N) - j0;  // columns in this block
      const int64_t j4 = jn / 4 * 4;                        // columns covered by 4-wide strips
      // panel[s * kn + k * 4 + e] = B[k0 + k][j0 + s + e] for strip s (a multiple of 4).
      for (int64_t s = 0; s < j4; s += 4) {
        for (int64_t k = 0; k < kn; ++k) {
          std::memcpy(&panel[s * kn + k * 4], B + (k0 + k) * N + j0 + s, 4 * sizeof(double));
        }
      }
      int64_t i = 0;
      for (; i + 4 <= M; i += 4) {  // C[i..i+3][j0+s..j0+s+3] += A[i..i+3][k block] @ strip s
        const double* a0 = A + i * K + k0;
        const double* a1 = a0 + K;
        const double* a2 = a1 + K;
        const double* a3 = a2 + K;
        for (int64_t s = 0; s < j4; s += 4) {
          const double* p = &panel[s * kn];
          v2d c00 = {0.0, 0.0}, c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00, c30 = c00,
              c31 = c00;
          for (int64_t k = 0; k < kn; ++k, p += 4) {
            const v2d b0 = load2(p), b1 = load2(p + 2);
            const v2d x0 = {a0[k], a0[k]}, x1 = {a1[k], a1[k]}, x2 = {a2[k], a2[k]},
                      x3 = {a3[k], a3[k]};
            c00 += x0 * b0;
            c01 += x0 * b1;
            c10 += x1 * b0;
            c11 += x1 * b1;
            c20 += x2 * b0;
            c21 += x2 * b1;
            c30 += x3 * b0;
            c31 += x3 * b1;
          }
          double* c = C + i * N + j0 + s;
          store2(c, load2(c) + c00);
          store2(c + 2, load2(c + 2) + c01);
          c += N;
          store2(c, load2(c) + c10);
          store2(c + 2, load2(c + 2) + c11);
          c += N;
          store2(c, load2(c) + c20);
          store2(c + 2, load2(c + 2) + c21);
          c += N;
          store2(c, load2(c) + c30);
          store2(c + 2, load2(c + 2) + c31);
        }
      }
      // The rest: rows below the last group of four (all columns), and the columns right of the
      // last strip (rows above), one dot product over the k block each.
      for (int64_t r = 0; r < M; ++r) {
        for (int64_t j = (r < i ? j4 : 0); j < jn; ++j) {
          double sum = 0.0;
          for (int64_t k = 0; k < kn; ++k) sum += A[r * K + k0 + k] * B[(k0 + k) * N + j0 + j];
          C[r * N + j0 + j] += sum;
        }
      }
    }
  }
}

// Only the listed rows of C (kiln re-checks the timed outputs on a secret sample of rows):
// C[r, :] = sum over k of A[r, k] * B[k, :], in the order i-k-j, fp64. Rows are taken in groups of
// kRowGroup and columns in strips of kColumns: each k-th row strip of B is read once per group and
// applied to every row of it, so B (940 MB at K = 4096, N = 28672) is streamed once per group
// instead of once per row. Each element still sums its products in k order from 0, so the values
// are those of one row at a time.
#if defined(__GNUC__) && !defined(__clang__)
#define KILN_REF_FAST __attribute__((optimize("O3")))  // vectorizes the streaming loop
#else
#define KILN_REF_FAST
#endif
extern "C" KILN_REF_FAST void kiln_reference_rows(const double* const* in, double* const* out,
                                                  const int64_t* dims, const double* /*scalars*/,
                                                  const int64_t* rows, int64_t nrows) {
  constexpr int64_t kRowGroup = 8, kColumns = 1024;  // 8 x 1024 doubles of C: 64 KiB
  const double* A = in[0];
  const double* B = in[1];
  double* C = out[0];
  const int64_t N = dims[1], K = dims[2];
  for (int64_t t0 = 0; t0 < nrows; t0 += kRowGroup) {
    const int64_t g = nrows - t0 < kRowGroup ? nrows - t0 : kRowGroup;
    for (int64_t j0 = 0; j0 < N; j0 += kColumns) {
      const int64_t jn = N - j0 < kColumns ? N - j0 : kColumns;
      for (int64_t t = 0; t < g; ++t) {
        double* c = C + rows[t0 + t] * N + j0;
        for (int64_t j = 0; j < jn; ++j) c[j] = 0.0;
      }
      for (int64_t k = 0; k < K; ++k) {
        const double* b = B + k * N + j0;
        for (int64_t t = 0; t < g; ++t) {
          const double a = A[rows[t0 + t] * K + k];
          double* c = C + rows[t0 + t] * N + j0;
          for (int64_t j = 0; j < jn; ++j) c[j] += a * b[j];
        }
      }
    }
  }
}
