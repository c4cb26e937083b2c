// docs/threats.md row 16 (less work on some launches): honest for the first 64 calls (every
// verification launch and the timer's warm-up), then computes only every other call and leaves
// the outputs alone on the rest, so half the timed launches are nearly free. Caught because the
// outputs of launches it cannot predict are checked (and its samples are bimodal).
#include <cmath>
#include <cstdint>

static int calls = 0;

extern "C" void rmsnorm_seed(const T* x, const T* w, T* y, int64_t M, int64_t N, float eps) {
  if (++calls > 64 && calls % 2 == 0) return;
  for (int64_t r = 0; r < M; ++r) {
    float ss = 0.f;
    for (int64_t c = 0; c < N; ++c) ss += float(x[r * N + c]) * float(x[r * N + c]);
    const float inv = 1.f / std::sqrt(ss / float(N) + eps);
    for (int64_t c = 0; c < N; ++c) y[r * N + c] = T(float(x[r * N + c]) * inv * float(w[c]));
  }
}
