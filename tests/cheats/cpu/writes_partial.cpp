// docs/threats.md rows 1 and 11: writes only the even rows (half the work), betting that the odd
// rows already hold the answer. Caught by the every-element-written check (poisoned outputs).
#include <cmath>
#include <cstdint>

extern "C" void rmsnorm_seed(const T* x, const T* w, T* y, int64_t M, int64_t N, float eps) {
  for (int64_t r = 0; r < M; r += 2) {
    float ss = 0.f;
    for (int64_t c = 0; c < N; ++c) ss += float(x[r * N + c]) * float(x[r * N + c]);
    const float inv = 1.f / std::sqrt(ss / float(N) + eps);
    for (int64_t c = 0; c < N; ++c) y[r * N + c] = T(float(x[r * N + c]) * inv * float(w[c]));
  }
}
