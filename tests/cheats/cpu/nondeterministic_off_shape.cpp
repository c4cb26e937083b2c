// docs/threats.md row 17 (determinism checked at one shape): bitwise deterministic at the largest
// sweep shape (128 x 8192), where the determinism stage used to repeat, and off by one ulp on
// alternate calls everywhere else -- inside the tolerance, but two runs on the same inputs differ.
#include <cmath>
#include <cstdint>
#include <cstring>

static int calls = 0;

extern "C" void rmsnorm_seed(const T* x, const T* w, T* y, int64_t M, int64_t N, float eps) {
  const bool wobble = !(M == 128 && N == 8192) && ++calls % 2 == 0;
  for (int64_t r = 0; r < M; ++r) {
    float ss = 0.f;
    for (int64_t c = 0; c < N; ++c) ss += float(x[r * N + c]) * float(x[r * N + c]);
    const float inv = 1.f / std::sqrt(ss / float(N) + eps);
    for (int64_t c = 0; c < N; ++c) {
      T v = T(float(x[r * N + c]) * inv * float(w[c]));
      if (wobble && std::isfinite(float(v))) {  // flip the lowest bit of the significand
        unsigned char bytes[sizeof(T)];
        std::memcpy(bytes, &v, sizeof(T));
        bytes[0] ^= 1;
        std::memcpy(&v, bytes, sizeof(T));
      }
      y[r * N + c] = v;
    }
  }
}
