// docs/threats.md row 4 (a shortcut that fits typical data): leaves eps out of the normalization,
// which changes nothing measurable while mean(x^2) >> eps, i.e. on N(0, 1) and U(-1, 1) inputs.
// Caught by the adversarial distributions: small-magnitude rows (mean(x^2) ~ eps) and all-zero
// rows (0 / 0 = NaN).
#include <cmath>
#include <cstdint>

extern "C" void rmsnorm_seed(const T* x, const T* w, T* y, int64_t M, int64_t N, float eps) {
  for (int64_t r = 0; r < M; ++r) {
    float ss = 0.f;
    for (int64_t c = 0; c < N; ++c) ss += float(x[r * N + c]) * float(x[r * N + c]);
    const float inv = 1.f / std::sqrt(ss / float(N));
    for (int64_t c = 0; c < N; ++c) y[r * N + c] = T(float(x[r * N + c]) * inv * float(w[c]));
  }
}
