// docs/threats.md row 1 (output memory reuse): writes nothing, betting that the output buffer still
// holds a right answer from an earlier run. Caught because outputs are poisoned before every run.
#include <cstdint>

extern "C" void rmsnorm_seed(const T* x, const T* w, T* y, int64_t M, int64_t N, float eps) {}
