// docs/threats.md row 6 (work escaping the timer): returns at once and lets a detached std::thread
// do the work, so the timed call measures only the spawn. Rejected by the static scan (std::thread,
// and <thread> is not an allowed header).
#include <cmath>
#include <cstdint>
#include <thread>

extern "C" void rmsnorm_seed(const T* x, const T* w, T* y, int64_t M, int64_t N, float eps) {
  std::thread([=] {
    for (int64_t r = 0; r < M; ++r) {
      float ss = 0.f;
      for (int64_t c = 0; c < N; ++c) ss += float(x[r * N + c]) * float(x[r * N + c]);
      const float inv = 1.f / std::sqrt(ss / float(N) + eps);
      for (int64_t c = 0; c < N; ++c) y[r * N + c] = T(float(x[r * N + c]) * inv * float(w[c]));
    }
  }).detach();
}
