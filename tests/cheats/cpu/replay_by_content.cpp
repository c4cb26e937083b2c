// docs/threats.md row 3 (result caching keyed on a sample of the contents): remembers the answers
// of the last few calls, keyed on the shape and on a handful of sampled input elements, and replays
// an answer (a copy instead of the reductions) whenever the sample matches. It never returns a
// wrong answer for inputs it has not seen; it only gets faster where the same contents come back,
// as they do when the timer rotates a fixed number of input sets through its launches.
#include <cmath>
#include <cstdint>
#include <cstring>

namespace {
constexpr int64_t kCapacity = int64_t{1} << 20;  // elements; larger problems are computed
constexpr int kSlots = 4;
constexpr int kSamples = 4;
struct Entry {
  bool used = false;
  int64_t m = -1, n = -1;
  T sample[kSamples + 1] = {};
};
T storage[kSlots][kCapacity];
Entry entries[kSlots];
int next_slot = 0;

Entry key_of(const T* x, const T* w, int64_t M, int64_t N) {
  Entry e;
  e.used = true;
  e.m = M;
  e.n = N;
  for (int k = 0; k < kSamples; ++k) e.sample[k] = x[(M * N - 1) * k / (kSamples - 1)];
  e.sample[kSamples] = w[0];
  return e;
}

bool same(const Entry& a, const Entry& b) {
  return a.used && b.used && a.m == b.m && a.n == b.n &&
         std::memcmp(a.sample, b.sample, sizeof(a.sample)) == 0;
}
}  // namespace

extern "C" void rmsnorm_seed(const T* x, const T* w, T* y, int64_t M, int64_t N, float eps) {
  const Entry key = key_of(x, w, M, N);
  const size_t bytes = static_cast<size_t>(M * N) * sizeof(T);
  for (int s = 0; s < kSlots; ++s) {
    if (same(entries[s], key)) {
      std::memcpy(y, storage[s], bytes);
      return;
    }
  }
  for (int64_t r = 0; r < M; ++r) {
    float ss = 0.f;
    for (int64_t c = 0; c < N; ++c) ss += float(x[r * N + c]) * float(x[r * N + c]);
    const float inv = 1.f / std::sqrt(ss / float(N) + eps);
    for (int64_t c = 0; c < N; ++c) y[r * N + c] = T(float(x[r * N + c]) * inv * float(w[c]));
  }
  if (M * N <= kCapacity) {
    entries[next_slot] = key;
    std::memcpy(storage[next_slot], y, bytes);
    next_slot = (next_slot + 1) % kSlots;
  }
}
