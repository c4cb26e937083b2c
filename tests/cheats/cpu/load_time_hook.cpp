// docs/threats.md row 7 (harness tampering): a load-time constructor that could patch the timer or
// the checker living in the same process, plus a clock_gettime() of its own that interposes on the
// timer's clock and makes every call look short. Rejected by the static scan (constructor,
// clock_gettime).
#include <cmath>
#include <cstdint>
#include <ctime>

static long fake_ns = 0;

__attribute__((constructor)) static void tamper() { fake_ns = 1; }

extern "C" int clock_gettime(clockid_t, struct timespec* ts) {
  ts->tv_sec = 0;
  ts->tv_nsec = fake_ns++;
  return 0;
}

extern "C" void rmsnorm_seed(const T* x, const T* w, T* y, int64_t M, int64_t N, float eps) {
  for (int64_t r = 0; r < M; ++r) {
    float ss = 0.f;
    for (int64_t c = 0; c < N; ++c) ss += float(x[r * N + c]) * float(x[r * N + c]);
    const float inv = 1.f / std::sqrt(ss / float(N) + eps);
    for (int64_t c = 0; c < N; ++c) y[r * N + c] = T(float(x[r * N + c]) * inv * float(w[c]));
  }
}
