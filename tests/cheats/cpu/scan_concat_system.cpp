// docs/threats.md row 5 (work done outside the kernel), past the text scan: hands the work to
// another program through system(), whose name is never written: glibc's __CONCAT (sys/cdefs.h,
// which every allowed header pulls in) pastes it together, and the text scan bans `##`, not a macro
// from a header that uses it. Refused at compile by the scan of the preprocessed source
// (identifier:system).
#include <cmath>
#include <cstdint>

extern "C" void rmsnorm_seed(const T* x, const T* w, T* y, int64_t M, int64_t N, float eps) {
  if (__CONCAT(sys, tem)("true") != 0) return;
  for (int64_t r = 0; r < M; ++r) {
    float ss = 0.f;
    for (int64_t c = 0; c < N; ++c) ss += float(x[r * N + c]) * float(x[r * N + c]);
    const float inv = 1.f / std::sqrt(ss / float(N) + eps);
    for (int64_t c = 0; c < N; ++c) y[r * N + c] = T(float(x[r * N + c]) * inv * float(w[c]));
  }
}
