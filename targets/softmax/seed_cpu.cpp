// Softmax seed for the cpu backend: three passes per row in float.
#include <cmath>
#include <cstdint>

extern "C" void softmax_seed(const T* x, T* y, int64_t M, int64_t N) {
  for (int64_t r = 0; r < M; ++r) {
    const T* xr = x + r * N;
    float m = -INFINITY;
    for (int64_t c = 0; c < N; ++c) m = std::fmax(m, float(xr[c]));
    float s = 0.f;
    for (int64_t c = 0; c < N; ++c) s += std::exp(float(xr[c]) - m);
    for (int64_t c = 0; c < N; ++c) y[r * N + c] = T(std::exp(float(xr[c]) - m) / s);
  }
}
