// docs/threats.md row 5 (a vendor library instead of the kernel): dlopen()s a BLAS and calls it, so
// the time measured is the library's. Rejected by the static scan (dlopen, dlsym).
#include <cstdint>
#include <dlfcn.h>

extern "C" void rmsnorm_seed(const T* x, const T* w, T* y, int64_t M, int64_t N, float eps) {
  void* blas = dlopen("libopenblas.so.0", RTLD_NOW);
  using Scal = void (*)(int, float, float*, int);
  auto scal = reinterpret_cast<Scal>(dlsym(blas, "cblas_sscal"));
  if (scal != nullptr) scal(static_cast<int>(N), 1.f, y, 1);
}
