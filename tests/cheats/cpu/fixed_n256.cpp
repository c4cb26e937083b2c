// docs/threats.md row 12 (shape specialization): the row length is hard-coded to 256, the smoke and
// benchmark shape, so the compiler can unroll and vectorize the whole row; other widths are
// simply wrong. Caught by the shape sweep.
#include <cmath>
#include <cstdint>

constexpr int64_t kN = 256;

extern "C" void rmsnorm_seed(const T* x, const T* w, T* y, int64_t M, int64_t N, float eps) {
  for (int64_t r = 0; r < M; ++r) {
    float ss = 0.f;
    for (int64_t c = 0; c < kN; ++c) ss += float(x[r * N + c]) * float(x[r * N + c]);
    const float inv = 1.f / std::sqrt(ss / float(kN) + eps);
    for (int64_t c = 0; c < kN; ++c) y[r * N + c] = T(float(x[r * N + c]) * inv * float(w[c]));
  }
}
