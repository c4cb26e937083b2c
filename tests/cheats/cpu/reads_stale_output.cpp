// docs/threats.md row 11 (reading memory it never wrote): before writing each output element it
// reads that element's old contents and lets their lowest bit nudge the result by one ulp. Every
// answer is within tolerance, but what it writes depends on what the buffer held. Caught by the
// determinism stage: the same inputs under another poison pattern give different bits.
#include <cmath>
#include <cstdint>
#include <cstring>

extern "C" void rmsnorm_seed(const T* x, const T* w, T* y, int64_t M, int64_t N, float eps) {
  for (int64_t r = 0; r < M; ++r) {
    float ss = 0.f;
    for (int64_t c = 0; c < N; ++c) ss += float(x[r * N + c]) * float(x[r * N + c]);
    const float inv = 1.f / std::sqrt(ss / float(N) + eps);
    for (int64_t c = 0; c < N; ++c) {
      unsigned char stale = 0;
      std::memcpy(&stale, &y[r * N + c], 1);
      T v = T(float(x[r * N + c]) * inv * float(w[c]));
      if (std::isfinite(float(v))) {  // a flipped low bit would turn an infinity into NaN
        unsigned char low = 0;
        std::memcpy(&low, &v, 1);
        low ^= stale & 1;
        std::memcpy(&v, &low, 1);
      }
      y[r * N + c] = v;
    }
  }
}
