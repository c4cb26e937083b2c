// A control, not a cheat: honest work every call, but its first 60 calls at the benchmark shape
// (64 x 256, which no verification stage uses) alternate between one and sixteen times the work
// (as bimodal_work.cpp, and for the same reason), as if the machine were busy for a moment. With
// 100 samples a timing (cheats_test.cc), the first timing is bimodal; the second, with fresh sites,
// is steady and is the one judged: a kernel is not refused for a moment of noise.
#include <cmath>
#include <cstdint>

static int bench_calls = 0;

extern "C" void rmsnorm_seed(const T* x, const T* w, T* y, int64_t M, int64_t N, float eps) {
  const bool noisy = M == 64 && N == 256 && ++bench_calls <= 60;
  const int repeats = noisy && bench_calls % 2 == 0 ? 16 : 1;
  for (int rep = 0; rep < repeats; ++rep) {
    for (int64_t r = 0; r < M; ++r) {
      float ss = 0.f;
      for (int64_t c = 0; c < N; ++c) ss += float(x[r * N + c]) * float(x[r * N + c]);
      const float inv = 1.f / std::sqrt(ss / float(N) + eps);
      for (int64_t c = 0; c < N; ++c) y[r * N + c] = T(float(x[r * N + c]) * inv * float(w[c]));
    }
  }
}
