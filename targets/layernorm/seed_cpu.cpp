// layernorm seed for the cpu backend: three passes per row in float. The row is shifted by its
// first element before summing (d = x - x[0]), so rows of equal values give d = 0, variance 0 and
// y = b exactly, and rows with a large mean lose no precision; then mean(d), the mean of
// (d - mean(d))^2, and y = (d - mean(d)) / sqrt(var + eps) * w + b. Sums use 8 interleaved float
// accumulators (as a vectorizing compiler would), which keeps the rounding error of long rows low.
#include <cmath>
#include <cstdint>

extern "C" void layernorm_seed(const T* x, const T* w, const T* b, T* y, int64_t M, int64_t N,
                               float eps) {
  for (int64_t r = 0; r < M; ++r) {
    const T* xr = x + r * N;
    const float k = float(xr[0]);
    float acc[8] = {};
    for (int64_t c = 0; c < N; ++c) acc[c % 8] += float(xr[c]) - k;
    float s = 0.f;
    for (float a : acc) s += a;
    const float mean = s / float(N);
    float sq[8] = {};
    for (int64_t c = 0; c < N; ++c) {
      const float d = (float(xr[c]) - k) - mean;
      sq[c % 8] += d * d;
    }
    float ss = 0.f;
    for (float a : sq) ss += a;
    const float inv = 1.f / std::sqrt(ss / float(N) + eps);
    for (int64_t c = 0; c < N; ++c) {
      y[r * N + c] = T(((float(xr[c]) - k) - mean) * inv * float(w[c]) + float(b[c]));
    }
  }
}
