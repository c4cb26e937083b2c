// rmsnorm template for the cpu backend: UNROLL independent partial sums per row so the compiler
// can keep several vector accumulators in flight.
#include <cmath>
#include <cstdint>

#ifndef UNROLL
#define UNROLL 4
#endif

extern "C" void rmsnorm(const T* x, const T* w, T* y, int64_t M, int64_t N, float eps) {
  for (int64_t r = 0; r < M; ++r) {
    const T* xr = x + r * N;
    float acc[UNROLL] = {};
    int64_t c = 0;
    for (; c + UNROLL <= N; c += UNROLL) {
      for (int k = 0; k < UNROLL; ++k) acc[k] += float(xr[c + k]) * float(xr[c + k]);
    }
    float ss = 0.f;
    for (int k = 0; k < UNROLL; ++k) ss += acc[k];
    for (; c < N; ++c) ss += float(xr[c]) * float(xr[c]);
    const float inv = 1.f / std::sqrt(ss / float(N) + eps);
    for (int64_t j = 0; j < N; ++j) y[r * N + j] = T(float(xr[j]) * inv * float(w[j]));
  }
}
