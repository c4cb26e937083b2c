// docs/threats.md row 5 (work done outside the kernel): hands the work to another program through
// std::system, after which the kernel's own time means nothing. Rejected by the static scan.
#include <cstdint>
#include <cstdlib>

extern "C" void rmsnorm_seed(const T* x, const T* w, T* y, int64_t M, int64_t N, float eps) {
  std::system("true");
}
