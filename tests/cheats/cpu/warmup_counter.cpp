// docs/threats.md row 8 (warm-up detection): counts its calls in a static and is correct only for
// the first three, taking them for warm-up or a first check; after that it writes nothing. Caught
// by the later verification cases (the sweep), whose outputs are poisoned and checked like the
// first.
#include <cmath>
#include <cstdint>

static int calls = 0;

extern "C" void rmsnorm_seed(const T* x, const T* w, T* y, int64_t M, int64_t N, float eps) {
  if (++calls > 3) return;
  for (int64_t r = 0; r < M; ++r) {
    float ss = 0.f;
    for (int64_t c = 0; c < N; ++c) ss += float(x[r * N + c]) * float(x[r * N + c]);
    const float inv = 1.f / std::sqrt(ss / float(N) + eps);
    for (int64_t c = 0; c < N; ++c) y[r * N + c] = T(float(x[r * N + c]) * inv * float(w[c]));
  }
}
