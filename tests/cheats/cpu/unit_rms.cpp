// docs/threats.md row 4 (an answer fitted to one input distribution): assumes every row's RMS is 1,
// as it is on average for N(0, 1) data, and skips the normalization: y = x * w. Off by a few
// percent on N(0, 1) rows of 256 and by orders of magnitude on scaled data; caught at once (smoke).
#include <cstdint>

extern "C" void rmsnorm_seed(const T* x, const T* w, T* y, int64_t M, int64_t N, float eps) {
  for (int64_t r = 0; r < M; ++r) {
    for (int64_t c = 0; c < N; ++c) y[r * N + c] = T(float(x[r * N + c]) * float(w[c]));
  }
}
