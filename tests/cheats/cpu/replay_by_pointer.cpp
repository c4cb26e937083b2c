// docs/threats.md row 3 (result caching): keeps the last answer per output pointer and shape in a
// static buffer and replays it whenever the same (y, M, N) comes back, without looking at x.
// Caught in verification: consecutive cases of one shape get the same buffers (the sandbox pools
// them by size) with new contents, so the second adversarial case receives a stale answer.
#include <cmath>
#include <cstdint>
#include <cstring>

namespace {
constexpr int64_t kCapacity = int64_t{1} << 20;  // elements; larger problems are computed
T cache[kCapacity];
const T* cached_y = nullptr;
int64_t cached_m = -1, cached_n = -1;
}  // namespace

extern "C" void rmsnorm_seed(const T* x, const T* w, T* y, int64_t M, int64_t N, float eps) {
  if (y == cached_y && M == cached_m && N == cached_n) {
    std::memcpy(y, cache, static_cast<size_t>(M * N) * sizeof(T));
    return;
  }
  for (int64_t r = 0; r < M; ++r) {
    float ss = 0.f;
    for (int64_t c = 0; c < N; ++c) ss += float(x[r * N + c]) * float(x[r * N + c]);
    const float inv = 1.f / std::sqrt(ss / float(N) + eps);
    for (int64_t c = 0; c < N; ++c) y[r * N + c] = T(float(x[r * N + c]) * inv * float(w[c]));
  }
  if (M * N <= kCapacity) {
    std::memcpy(cache, y, static_cast<size_t>(M * N) * sizeof(T));
    cached_y = y;
    cached_m = M;
    cached_n = N;
  }
}
