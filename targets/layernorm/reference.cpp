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
