// layernorm template for the cpu backend: the seed's three passes (shifted by the row's first
// element, two-pass variance) with LANES independent float accumulators per sum, so the compiler
// can keep that many vector lanes in flight; the output pass is a plain vectorizable loop.
#include <cmath>
#include <cstdint>

#ifndef LANES
#define LANES 8
#endif

extern "C" void layernorm(const T* x, const T* w, const T* b, T* y, int64_t M, int64_t N,
                          float eps) {
  for (int64_t r = 0; r < M; ++r) {
    const T* xr = x + r * N;
    const float k = float(xr[0]);
    float acc[LANES] = {};
    int64_t c = 0;
    for (; c + LANES <= N; c += LANES) {
      for (int j = 0; j < LANES; ++j) acc[j] += float(xr[c + j]) - k;
    }
    for (; c < N; ++c) acc[0] += float(xr[c]) - k;
    float s = 0.f;
    for (int j = 0; j < LANES; ++j) s += acc[j];
    const float mean = s / float(N);
    float sq[LANES] = {};
    for (c = 0; c + LANES <= N; c += LANES) {
      for (int j = 0; j < LANES; ++j) {
        const float d = (float(xr[c + j]) - k) - mean;
        sq[j] += d * d;
      }
    }
    for (; c < N; ++c) {
      const float d = (float(xr[c]) - k) - mean;
      sq[0] += d * d;
    }
    float ss = 0.f;
    for (int j = 0; j < LANES; ++j) ss += sq[j];
    const float inv = 1.f / std::sqrt(ss / float(N) + eps);
    T* yr = y + r * N;
    for (int64_t j = 0; j < N; ++j) yr[j] = T(((float(xr[j]) - k) - mean) * inv * float(w[j]) + float(b[j]));
  }
}
