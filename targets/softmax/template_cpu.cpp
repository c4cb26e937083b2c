// Softmax template for the cpu backend: UNROLL independent partial sums of the exponentials.
#include <cmath>
#include <cstdint>

#ifndef UNROLL
#define UNROLL 4
#endif

extern "C" void softmax(const T* x, T* y, int64_t M, int64_t N) {
  for (int64_t r = 0; r < M; ++r) {
    const T* xr = x + r * N;
    float m = -INFINITY;
    for (int64_t c = 0; c < N; ++c) m = std::fmax(m, float(xr[c]));
    float acc[UNROLL] = {};
    int64_t c = 0;
    for (; c + UNROLL <= N; c += UNROLL) {
      for (int k = 0; k < UNROLL; ++k) acc[k] += std::exp(float(xr[c + k]) - m);
    }
    float s = 0.f;
    for (int k = 0; k < UNROLL; ++k) s += acc[k];
    for (; c < N; ++c) s += std::exp(float(xr[c]) - m);
    const float inv = 1.f / s;
    for (int64_t j = 0; j < N; ++j) y[r * N + j] = T(std::exp(float(xr[j]) - m) * inv);
  }
}
