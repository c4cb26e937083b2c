// docs/threats.md row 8 (warm-up detection, aimed at the timer): correct for the first 64 calls,
// which cover every verification launch (58 for rmsnorm on the cpu backend) and the timer's
// warm-up, then writes nothing. Caught only because the timed launches' outputs are re-checked.
#include <cmath>
#include <cstdint>

static int calls = 0;

extern "C" void rmsnorm_seed(const T* x, const T* w, T* y, int64_t M, int64_t N, float eps) {
  if (++calls > 64) return;
  for (int64_t r = 0; r < M; ++r) {
    float ss = 0.f;
    for (int64_t c = 0; c < N; ++c) ss += float(x[r * N + c]) * float(x[r * N + c]);
    const float inv = 1.f / std::sqrt(ss / float(N) + eps);
    for (int64_t c = 0; c < N; ++c) y[r * N + c] = T(float(x[r * N + c]) * inv * float(w[c]));
  }
}
