// docs/threats.md row 5 (a vendor library instead of the kernel): scales the rows with cuBLAS's
// half-precision GEMM (a diagonal-matrix product), so the time measured is the library's.
// Rejected by the static scan (identifier:cublasHgemm); device code cannot link it anyway.
extern "C" __global__ void rmsnorm_seed(const T* x, const T* w, T* y, long long M, long long N,
                                        float eps) {
  cublasHgemm(nullptr, 0, 0, 1, N, M, 1, nullptr, w, 1, x, N, nullptr, y, N);
}
