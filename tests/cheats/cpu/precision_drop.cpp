// docs/threats.md row 10 (a precision drop just inside the tolerance): right to ~8e-6 relative --
// the 1/rms factor keeps only 17 bits of its significand, as a cruder approximation would -- which
// the f32 tolerance (2e-5) admits, but its error is tens of times the seed's on the same inputs.
#include <cmath>
#include <cstdint>
#include <cstring>

extern "C" void rmsnorm_seed(const T* x, const T* w, T* y, int64_t M, int64_t N, float eps) {
  for (int64_t r = 0; r < M; ++r) {
    float ss = 0.f;
    for (int64_t c = 0; c < N; ++c) ss += float(x[r * N + c]) * float(x[r * N + c]);
    float inv = 1.f / std::sqrt(ss / float(N) + eps);
    uint32_t bits;
    std::memcpy(&bits, &inv, sizeof(bits));
    bits &= ~uint32_t{0x3F};  // drop the six lowest significand bits
    std::memcpy(&inv, &bits, sizeof(bits));
    for (int64_t c = 0; c < N; ++c) y[r * N + c] = T(float(x[r * N + c]) * inv * float(w[c]));
  }
}
