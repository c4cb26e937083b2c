// Trusted reference for rmsnorm, in fp64 on the host. Inputs arrive already rounded to the dtype
// under test (converted to double), so the reference sees exactly what the candidate saw.
#include <cmath>
#include <cstdint>

extern "C" void kiln_reference(const double* const* in, double* const* out, const int64_t* dims,
                               const double* scalars) {
  const int64_t M = dims[0], N = dims[1];
  const double eps = scalars[0];
  const double* x = in[0];
  const double* w = in[1];
  double* y = out[0];
  for (int64_t r = 0; r < M; ++r) {
    double ss = 0;
    for (int64_t c = 0; c < N; ++c) ss += x[r * N + c] * x[r * N + c];
    const double inv = 1.0 / std::sqrt(ss / static_cast<double>(N) + eps);
    for (int64_t c = 0; c < N; ++c) y[r * N + c] = x[r * N + c] * inv * w[c];
  }
}
