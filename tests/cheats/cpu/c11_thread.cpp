// docs/threats.md row 6 (work escaping the timer), past the scan: where it sees the A-B-A pointer
// pattern of a timing loop, it returns at once and leaves the work to a detached C11 thread
// (thrd_create, declared by hand: no header needed), which runs on while the harness flushes
// caches between samples. Should be rejected by the static scan like std::thread.
#include <cmath>
#include <cstdint>

extern "C" int thrd_create(unsigned long* thread, int (*start)(void*), void* arg);
extern "C" int thrd_detach(unsigned long thread);

namespace {
struct Job {
  const T* x;
  const T* w;
  T* y;
  int64_t M, N;
  float eps;
};
constexpr int kJobs = 64;
Job jobs[kJobs];
int next_job = 0;
const T* history[2] = {nullptr, nullptr};  // y of the previous call, and of the one before

int work(void* arg) {
  const Job& j = *static_cast<const Job*>(arg);
  for (int64_t r = 0; r < j.M; ++r) {
    float ss = 0.f;
    for (int64_t c = 0; c < j.N; ++c) ss += float(j.x[r * j.N + c]) * float(j.x[r * j.N + c]);
    const float inv = 1.f / std::sqrt(ss / float(j.N) + j.eps);
    for (int64_t c = 0; c < j.N; ++c) {
      j.y[r * j.N + c] = T(float(j.x[r * j.N + c]) * inv * float(j.w[c]));
    }
  }
  return 0;
}
}  // namespace

extern "C" void rmsnorm_seed(const T* x, const T* w, T* y, int64_t M, int64_t N, float eps) {
  const bool timing_pattern = history[1] == y && history[0] != y;
  history[1] = history[0];
  history[0] = y;
  Job& job = jobs[next_job];
  next_job = (next_job + 1) % kJobs;
  job = {x, w, y, M, N, eps};
  unsigned long thread = 0;
  if (!timing_pattern || thrd_create(&thread, work, &job) != 0) {
    work(&job);
    return;
  }
  thrd_detach(thread);
}
