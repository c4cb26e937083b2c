// Trusted reference for layernorm, in fp64 on the host: per row, the mean, then the population
// variance as the mean of squared deviations from it (two passes, no cancellation), then
// y = (x - mean) / sqrt(var + eps) * w + b. Inputs arrive already rounded to the dtype under test.
// A non-finite x poisons its whole row (the mean or the variance becomes NaN), as in any kernel.
#include <cmath>
#include <cstdint>

extern "C" void kiln_reference(const double* const* in, double* const* out, const int64_t* dims,
                               const double* scalars) {
  const int64_t M = dims[0], N = dims[1];
  const double eps = scalars[0];
  const double* x = in[0];
  const double* w = in[1];
  const double* b = in[2];
  double* y = out[0];
  for (int64_t r = 0; r < M; ++r) {
    const double* xr = x + r * N;
    double s = 0;
    for (int64_t c = 0; c < N; ++c) s += xr[c];
    const double mean = s / static_cast<double>(N);
    double ss = 0;
    for (int64_t c = 0; c < N; ++c) ss += (xr[c] - mean) * (xr[c] - mean);
    const double inv = 1.0 / std::sqrt(ss / static_cast<double>(N) + eps);
    for (int64_t c = 0; c < N; ++c) y[r * N + c] = (xr[c] - mean) * inv * w[c] + b[c];
  }
}

// Rows on demand (kiln re-checks the outputs of timed launches on secret rows): each listed row is
// the entry point above run on a one-row view of the problem (M = 1); rows are independent here.
extern "C" void kiln_reference_rows(const double* const* in, double* const* out,
                                    const int64_t* dims, const double* scalars,
                                    const int64_t* rows, int64_t nrows) {
  const int64_t N = dims[1];
  for (int64_t i = 0; i < nrows; ++i) {
    const int64_t r = rows[i];
    const double* row_in[] = {in[0] + r * N, in[1], in[2]};
    double* row_out[] = {out[0] + r * N};
    const int64_t row_dims[] = {1, N};
    kiln_reference(row_in, row_out, row_dims, scalars);
  }
}
