// Trusted reference for fused_mlp, in fp64 on the host, with no intermediate rounding:
//   g = x @ w1, u = x @ w3, h = silu(g) * u with silu(a) = a / (1 + exp(-a)), y = h @ w2.
// Rows of x are taken in blocks of up to 16 (any 16 rows: kiln_reference_rows uses the same code): for each k the k-th rows of w1 and w3 (and for y
// the rows of w2) are streamed once per block and applied to every row of the block (i-k-j order
// per row), so the benchmark shape reads the weights 128 times instead of 2048. The scratch
// arguments (h and sync) are the kernel's business: the reference neither sees nor writes them.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

// The benchmark shape needs ~2.8e11 multiply-adds here (a few minutes): let GCC vectorize the
// streaming loops (-O2 alone does not).
#if defined(__GNUC__) && !defined(__clang__)
#define KILN_REF_FAST __attribute__((optimize("O3")))
#else
#define KILN_REF_FAST
#endif

namespace {

// y rows ids[0..count) (count <= kRows), each from its own row of x; g and u are kRows x H.
KILN_REF_FAST void block_of_rows(const double* const* in, const int64_t* dims, const int64_t* ids,
                                 int64_t count, std::vector<double>& g, std::vector<double>& u,
                                 double* y) {
  const int64_t D = dims[1], H = dims[2];
  const double* x = in[0];
  const double* w1 = in[1];
  const double* w3 = in[2];
  const double* w2 = in[3];
  std::fill(g.begin(), g.end(), 0.0);
  std::fill(u.begin(), u.end(), 0.0);
  for (int64_t k = 0; k < D; ++k) {
    const double* __restrict a = w1 + k * H;
    const double* __restrict b = w3 + k * H;
    for (int64_t r = 0; r < count; ++r) {
      const double xv = x[ids[r] * D + k];
      double* __restrict gr = g.data() + r * H;
      double* __restrict ur = u.data() + r * H;
      for (int64_t j = 0; j < H; ++j) {
        gr[j] += xv * a[j];
        ur[j] += xv * b[j];
      }
    }
  }
  for (int64_t r = 0; r < count; ++r) {  // g becomes h
    double* gr = g.data() + r * H;
    const double* ur = u.data() + r * H;
    for (int64_t j = 0; j < H; ++j) gr[j] = gr[j] / (1.0 + std::exp(-gr[j])) * ur[j];
    double* yr = y + ids[r] * D;
    for (int64_t c = 0; c < D; ++c) yr[c] = 0.0;
  }
  for (int64_t j = 0; j < H; ++j) {
    const double* __restrict w = w2 + j * D;
    for (int64_t r = 0; r < count; ++r) {
      const double hv = g[r * H + j];
      double* __restrict yr = y + ids[r] * D;
      for (int64_t c = 0; c < D; ++c) yr[c] += hv * w[c];
    }
  }
}

constexpr int64_t kRows = 16;

}  // namespace

extern "C" void kiln_reference(const double* const* in, double* const* out, const int64_t* dims,
                               const double* /*scalars*/) {
  const int64_t M = dims[0], H = dims[2];
  std::vector<double> g(kRows * H), u(kRows * H);
  int64_t ids[kRows];
  for (int64_t i0 = 0; i0 < M; i0 += kRows) {
    const int64_t count = std::min(kRows, M - i0);
    for (int64_t r = 0; r < count; ++r) ids[r] = i0 + r;
    block_of_rows(in, dims, ids, count, g, u, out[0]);
  }
}

// Only the listed rows of y (kiln re-checks the timed outputs on a secret sample of rows: the
// whole benchmark shape takes minutes in fp64).
extern "C" void kiln_reference_rows(const double* const* in, double* const* out,
                                    const int64_t* dims, const double* /*scalars*/,
                                    const int64_t* rows, int64_t nrows) {
  const int64_t H = dims[2];
  std::vector<double> g(kRows * H), u(kRows * H);
  for (int64_t i0 = 0; i0 < nrows; i0 += kRows) {
    block_of_rows(in, dims, rows + i0, std::min(kRows, nrows - i0), g, u, out[0]);
  }
}
