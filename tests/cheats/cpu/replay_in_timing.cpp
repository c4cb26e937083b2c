// docs/threats.md rows 3 and 8 (result replay aimed at the timer): caches the answer per output
// pointer and shape, and replays it only on the A-B-A pattern of a timing loop that alternates
// buffer groups (this pointer two calls ago, another one in between). Verification runs each case
// once and repeats a pointer only back to back, so it never sees a replay. Caught only because
// the timer rotates input contents through the groups and re-checks the timed outputs.
#include <cmath>
#include <cstdint>
#include <cstring>

namespace {
constexpr int64_t kCapacity = int64_t{1} << 20;  // elements; larger problems are computed
constexpr int kSlots = 4;
struct Entry {
  const T* y = nullptr;
  int64_t m = -1, n = -1;
  T* data = nullptr;
};
T storage[kSlots][kCapacity];
Entry entries[kSlots];
int next_slot = 0;
const T* history[2] = {nullptr, nullptr};  // y of the previous call, and of the one before

Entry* find(const T* y, int64_t m, int64_t n) {
  for (Entry& e : entries) {
    if (e.y == y && e.m == m && e.n == n) return &e;
  }
  return nullptr;
}
}  // namespace

extern "C" void rmsnorm_seed(const T* x, const T* w, T* y, int64_t M, int64_t N, float eps) {
  const bool timing_pattern = history[1] == y && history[0] != y;
  history[1] = history[0];
  history[0] = y;
  const size_t bytes = static_cast<size_t>(M * N) * sizeof(T);
  if (Entry* e = find(y, M, N); e != nullptr && timing_pattern) {
    std::memcpy(y, e->data, bytes);
    return;
  }
  for (int64_t r = 0; r < M; ++r) {
    float ss = 0.f;
    for (int64_t c = 0; c < N; ++c) ss += float(x[r * N + c]) * float(x[r * N + c]);
    const float inv = 1.f / std::sqrt(ss / float(N) + eps);
    for (int64_t c = 0; c < N; ++c) y[r * N + c] = T(float(x[r * N + c]) * inv * float(w[c]));
  }
  if (M * N <= kCapacity) {
    Entry* e = find(y, M, N);
    if (e == nullptr) {
      e = &entries[next_slot];
      e->data = storage[next_slot];
      next_slot = (next_slot + 1) % kSlots;
    }
    e->y = y;
    e->m = M;
    e->n = N;
    std::memcpy(e->data, y, bytes);
  }
}
