// docs/threats.md row 17 (hostile values reach one shape): right at the first sweep shape (64 x
// 1024), where the adversarial distributions used to run, and everywhere else it clamps its inputs
// to +-1000 -- harmless for well-scaled inputs, wrong for large magnitudes and infinities.
#include <cmath>
#include <cstdint>

extern "C" void rmsnorm_seed(const T* x, const T* w, T* y, int64_t M, int64_t N, float eps) {
  const bool clamp = !(M == 64 && N == 1024);
  auto in = [&](int64_t i) {
    const float v = float(x[i]);
    return clamp ? std::fmin(std::fmax(v, -1000.f), 1000.f) : v;
  };
  for (int64_t r = 0; r < M; ++r) {
    float ss = 0.f;
    for (int64_t c = 0; c < N; ++c) ss += in(r * N + c) * in(r * N + c);
    const float inv = 1.f / std::sqrt(ss / float(N) + eps);
    for (int64_t c = 0; c < N; ++c) y[r * N + c] = T(in(r * N + c) * inv * float(w[c]));
  }
}
