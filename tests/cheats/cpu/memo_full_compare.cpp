// docs/threats.md row 15 (memoization across timed launches, compared in full): keeps the inputs
// and outputs of the last calls and replays an output whenever shape and inputs match exactly. It
// never answers wrong; it only gets faster when the same inputs come back, as they did when the
// timer rotated a fixed number of input sets. With a secret subset of sites changed before every
// launch, no launch sees inputs an earlier one had: the cache never hits and the kernel is timed
// on its honest work (plus the compare).
#include <cmath>
#include <cstdint>
#include <cstring>

namespace {
constexpr int64_t kCapacity = int64_t{1} << 16;  // elements of x; larger problems are computed
constexpr int kSlots = 8;
struct Entry {
  bool used = false;
  int64_t m = -1, n = -1;
  T x[kCapacity];
  T w[kCapacity];
  T y[kCapacity];
};
Entry entries[kSlots];
int next_slot = 0;
}  // namespace

extern "C" void rmsnorm_seed(const T* x, const T* w, T* y, int64_t M, int64_t N, float eps) {
  const size_t count = static_cast<size_t>(M * N);
  if (M * N <= kCapacity) {
    for (Entry& e : entries) {
      if (e.used && e.m == M && e.n == N && std::memcmp(e.x, x, count * sizeof(T)) == 0 &&
          std::memcmp(e.w, w, static_cast<size_t>(N) * sizeof(T)) == 0) {
        std::memcpy(y, e.y, count * sizeof(T));
        return;
      }
    }
  }
  for (int64_t r = 0; r < M; ++r) {
    float ss = 0.f;
    for (int64_t c = 0; c < N; ++c) ss += float(x[r * N + c]) * float(x[r * N + c]);
    const float inv = 1.f / std::sqrt(ss / float(N) + eps);
    for (int64_t c = 0; c < N; ++c) y[r * N + c] = T(float(x[r * N + c]) * inv * float(w[c]));
  }
  if (M * N <= kCapacity) {
    Entry& e = entries[next_slot];
    next_slot = (next_slot + 1) % kSlots;
    e.used = true;
    e.m = M;
    e.n = N;
    std::memcpy(e.x, x, count * sizeof(T));
    std::memcpy(e.w, w, static_cast<size_t>(N) * sizeof(T));
    std::memcpy(e.y, y, count * sizeof(T));
  }
}
