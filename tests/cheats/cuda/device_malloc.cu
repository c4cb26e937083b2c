// docs/threats.md row 5 (reaching past the kernel): allocates its own scratch with the runtime's
// cudaMalloc from device code, outside the memory the sandbox hands it. Rejected by the static
// scan (identifier:cudaMalloc).
extern "C" __global__ void rmsnorm_seed(const T* x, const T* w, T* y, long long M, long long N,
                                        float eps) {
  float* scratch = nullptr;
  if (threadIdx.x == 0) cudaMalloc(reinterpret_cast<void**>(&scratch), N * sizeof(float));
}
