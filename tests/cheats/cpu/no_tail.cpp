// docs/threats.md row 12 (right only at friendly shapes): works in whole chunks of 256 elements and
// has no tail loop. Every benchmark, smoke and sweep width of rmsnorm is a multiple of 256, so only
// the edge shapes (N = 1, 3, 65, 1031, 4099) expose it: the tail stays unwritten.
#include <cmath>
#include <cstdint>

constexpr int64_t kChunk = 256;

extern "C" void rmsnorm_seed(const T* x, const T* w, T* y, int64_t M, int64_t N, float eps) {
  const int64_t full = N / kChunk * kChunk;
  for (int64_t r = 0; r < M; ++r) {
    float ss = 0.f;
    for (int64_t c = 0; c < full; ++c) ss += float(x[r * N + c]) * float(x[r * N + c]);
    const float inv = 1.f / std::sqrt(ss / float(N) + eps);
    for (int64_t c = 0; c < full; ++c) y[r * N + c] = T(float(x[r * N + c]) * inv * float(w[c]));
  }
}
