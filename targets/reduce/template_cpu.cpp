// Row-sum template for the cpu backend: UNROLL independent accumulators per row.
#include <cstdint>

#ifndef UNROLL
#define UNROLL 4
#endif

extern "C" void reduce(const T* x, T* y, int64_t M, int64_t N) {
  for (int64_t r = 0; r < M; ++r) {
    const T* xr = x + r * N;
    float acc[UNROLL] = {};
    int64_t c = 0;
    for (; c + UNROLL <= N; c += UNROLL) {
      for (int k = 0; k < UNROLL; ++k) acc[k] += float(xr[c + k]);
    }
    float s = 0.f;
    for (int k = 0; k < UNROLL; ++k) s += acc[k];
    for (; c < N; ++c) s += float(xr[c]);
    y[r] = T(s);
  }
}
