// Row-sum seed for the cpu backend: one float accumulator per row.
#include <cstdint>

extern "C" void reduce_seed(const T* x, T* y, int64_t M, int64_t N) {
  for (int64_t r = 0; r < M; ++r) {
    float s = 0.f;
    for (int64_t c = 0; c < N; ++c) s += float(x[r * N + c]);
    y[r] = T(s);
  }
}
