// docs/threats.md row 18 (writes outside its outputs): right, but also stores into the two elements
// just past the end of y (scratch of its own, or a neighbour's data). The guard regions around
// every buffer catch it, naming the buffer and how far past its end.
#include <cmath>
#include <cstdint>

extern "C" void rmsnorm_seed(const T* x, const T* w, T* y, int64_t M, int64_t N, float eps) {
  for (int64_t r = 0; r < M; ++r) {
    float ss = 0.f;
    for (int64_t c = 0; c < N; ++c) ss += float(x[r * N + c]) * float(x[r * N + c]);
    const float inv = 1.f / std::sqrt(ss / float(N) + eps);
    for (int64_t c = 0; c < N; ++c) y[r * N + c] = T(float(x[r * N + c]) * inv * float(w[c]));
  }
  y[M * N] = T(0);
  y[M * N + 1] = T(0);
}
