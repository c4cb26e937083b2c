// Vector-sum template for the cpu backend: UNROLL independent fp64 accumulators (summed in a
// fixed order at the end), rounded once to T. The scratch buffers are unused on the cpu.
#include <cstdint>

#ifndef UNROLL
#define UNROLL 4
#endif

extern "C" void vectorsum_v2(const T* x, T* y, double* /*partials*/, int32_t* /*count*/, int64_t N,
                             int64_t /*ONE*/) {
  double acc[UNROLL] = {};
  int64_t i = 0;
  for (; i + UNROLL <= N; i += UNROLL) {
    for (int k = 0; k < UNROLL; ++k) acc[k] += double(x[i + k]);
  }
  double s = 0;
  for (int k = 0; k < UNROLL; ++k) s += acc[k];
  for (; i < N; ++i) s += double(x[i]);
  y[0] = T(s);
}
