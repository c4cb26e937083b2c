// A control, not a cheat: honest work every call, but its first 500 calls alternate between one
// and four times the work, as if the machine were busy while the verification stages and the
// first timing ran (about 100 calls, then about 400 samples at this shape). That timing is
// bimodal; a second one, with fresh sites, is steady, and it is the one judged: a kernel is not
// refused for a moment of noise.
#include <cmath>
#include <cstdint>

static int calls = 0;

extern "C" void rmsnorm_seed(const T* x, const T* w, T* y, int64_t M, int64_t N, float eps) {
  const int repeats = ++calls < 500 && calls % 2 == 0 ? 4 : 1;
  for (int rep = 0; rep < repeats; ++rep) {
    for (int64_t r = 0; r < M; ++r) {
      float ss = 0.f;
      for (int64_t c = 0; c < N; ++c) ss += float(x[r * N + c]) * float(x[r * N + c]);
      const float inv = 1.f / std::sqrt(ss / float(N) + eps);
      for (int64_t c = 0; c < N; ++c) y[r * N + c] = T(float(x[r * N + c]) * inv * float(w[c]));
    }
  }
}
