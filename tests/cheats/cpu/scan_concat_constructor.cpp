// docs/threats.md row 7 (harness tampering), past the text scan: a load-time constructor, which
// runs inside the sandbox child when the kernel is loaded, next to the timer and the checker. The
// attribute's name is pasted by glibc's __CONCAT, so `constructor` is never written, and the
// hook imports nothing, so the import check after compiling sees nothing either. Refused at
// compile by the scan of the preprocessed source (identifier:constructor).
#include <cmath>
#include <cstdint>

static int loaded = 0;

__attribute__((__CONCAT(constr, uctor))) static void on_load() { loaded = 1; }

extern "C" void rmsnorm_seed(const T* x, const T* w, T* y, int64_t M, int64_t N, float eps) {
  for (int64_t r = 0; r < M; ++r) {
    float ss = 0.f;
    for (int64_t c = 0; c < N; ++c) ss += float(x[r * N + c]) * float(x[r * N + c]);
    const float inv = loaded / std::sqrt(ss / float(N) + eps);
    for (int64_t c = 0; c < N; ++c) y[r * N + c] = T(float(x[r * N + c]) * inv * float(w[c]));
  }
}
