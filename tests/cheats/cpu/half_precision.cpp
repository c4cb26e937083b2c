// docs/threats.md row 10 (precision downgrade): for f32 data, rounds x, w and the scale through
// _Float16 (about 3 significant digits) to halve the bytes a real kernel would move. Inside a
// loose tolerance, far outside f32's (rel 2e-5); caught at once (smoke).
#include <cmath>
#include <cstdint>

extern "C" void rmsnorm_seed(const T* x, const T* w, T* y, int64_t M, int64_t N, float eps) {
  for (int64_t r = 0; r < M; ++r) {
    float ss = 0.f;
    for (int64_t c = 0; c < N; ++c) {
      const float v = float(_Float16(float(x[r * N + c])));
      ss += v * v;
    }
    const _Float16 inv = _Float16(1.f / std::sqrt(ss / float(N) + eps));
    for (int64_t c = 0; c < N; ++c) {
      const _Float16 v = _Float16(float(x[r * N + c])) * inv * _Float16(float(w[c]));
      y[r * N + c] = T(float(v));
    }
  }
}
