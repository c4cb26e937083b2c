// docs/threats.md row 1 (output memory reuse): writes nothing, betting that the output buffer still
// holds a right answer from an earlier run. Caught because outputs are poisoned before every run.
extern "C" __global__ void rmsnorm_seed(const T* x, const T* w, T* y, long long M, long long N,
                                        float eps) {}
