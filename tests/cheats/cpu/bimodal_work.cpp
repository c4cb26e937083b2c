// docs/threats.md row 16, the timing side: always right, but every other call does its work
// sixteen times over, so its samples form two clusters. A median of such samples times neither
// kind of launch; the timing is refused as bimodal (a kernel that did less work on some launches
// looks the same). Sixteen, not four: on a machine whose other core streams memory, the samples
// of one launch kind spread over 4x and more, and those of a 1x/4x cheat merge into one smear
// that no test can call bimodal (seen in a parallel ctest run).
#include <cmath>
#include <cstdint>

static int calls = 0;

extern "C" void rmsnorm_seed(const T* x, const T* w, T* y, int64_t M, int64_t N, float eps) {
  const int repeats = ++calls % 2 == 0 ? 16 : 1;
  for (int rep = 0; rep < repeats; ++rep) {
    for (int64_t r = 0; r < M; ++r) {
      float ss = 0.f;
      for (int64_t c = 0; c < N; ++c) ss += float(x[r * N + c]) * float(x[r * N + c]);
      const float inv = 1.f / std::sqrt(ss / float(N) + eps);
      for (int64_t c = 0; c < N; ++c) y[r * N + c] = T(float(x[r * N + c]) * inv * float(w[c]));
    }
  }
}
