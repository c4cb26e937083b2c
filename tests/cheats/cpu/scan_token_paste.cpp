// docs/threats.md row 5 (work done outside the kernel): builds `system` from two allowed pieces
// with the token-pasting operator of its own macro. Rejected by the text scan (token-paste:##);
// were it not, the scan of the preprocessed source would see identifier:system.
#include <cmath>
#include <cstdint>

#define KILN_CAT(a, b) a##b

extern "C" void rmsnorm_seed(const T* x, const T* w, T* y, int64_t M, int64_t N, float eps) {
  KILN_CAT(sys, tem)("true");
}
