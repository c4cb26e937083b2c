// docs/threats.md rows 15 and 20 (memoization keyed on a sample of positions): remembers the
// outputs of every input it has seen, keyed on the shape and 16 fixed input positions, and replays
// them on a match. Launches whose secret sites lie elsewhere hit the cache and get a stale answer;
// the sites move far enough that the stale rows are wrong by much more than the tolerance, and the
// closing launches and the launches kept at random are checked.
#include <cmath>
#include <cstdint>
#include <cstring>

namespace {
constexpr int64_t kCapacity = int64_t{1} << 16;
constexpr int kSlots = 8;
constexpr int kSamples = 16;
struct Entry {
  bool used = false;
  int64_t m = -1, n = -1;
  T key[kSamples];
  T y[kCapacity];
};
Entry entries[kSlots];
int next_slot = 0;

void key_of(const T* x, int64_t count, T* key) {
  for (int k = 0; k < kSamples; ++k) key[k] = x[(count - 1) * k / (kSamples - 1)];
}
}  // namespace

extern "C" void rmsnorm_seed(const T* x, const T* w, T* y, int64_t M, int64_t N, float eps) {
  T key[kSamples];
  key_of(x, M * N, key);
  const size_t bytes = static_cast<size_t>(M * N) * sizeof(T);
  for (Entry& e : entries) {
    if (e.used && e.m == M && e.n == N && std::memcmp(e.key, key, sizeof(key)) == 0) {
      std::memcpy(y, e.y, bytes);
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
    Entry& e = entries[next_slot];
    next_slot = (next_slot + 1) % kSlots;
    e.used = true;
    e.m = M;
    e.n = N;
    std::memcpy(e.key, key, sizeof(key));
    std::memcpy(e.y, y, bytes);
  }
}
