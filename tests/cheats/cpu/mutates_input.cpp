// docs/threats.md row 2 (input mutation): computes the right answer, then zeroes its input x, so a
// checker that recomputed the reference from the candidate's buffers afterwards would expect
// all-zero outputs. Caught by the input checksum taken before and compared after the run.
#include <cmath>
#include <cstdint>
#include <cstring>

extern "C" void rmsnorm_seed(const T* x, const T* w, T* y, int64_t M, int64_t N, float eps) {
  for (int64_t r = 0; r < M; ++r) {
    float ss = 0.f;
    for (int64_t c = 0; c < N; ++c) ss += float(x[r * N + c]) * float(x[r * N + c]);
    const float inv = 1.f / std::sqrt(ss / float(N) + eps);
    for (int64_t c = 0; c < N; ++c) y[r * N + c] = T(float(x[r * N + c]) * inv * float(w[c]));
  }
  std::memset(const_cast<T*>(x), 0, static_cast<size_t>(M * N) * sizeof(T));
}
