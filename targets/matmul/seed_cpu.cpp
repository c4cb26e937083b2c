// Matmul seed for the cpu backend: C = A @ B (all row-major), a plain triple loop, one float
// accumulator per output element; used to validate the reference, shapes and tolerances. The
// scratch buffer ws goes unused.
#include <cstdint>

extern "C" void matmul_seed(const T* A, const T* B, T* C, float* ws, int64_t M, int64_t N,
                            int64_t K) {
  for (int64_t i = 0; i < M; ++i) {
    for (int64_t j = 0; j < N; ++j) {
      float acc = 0.f;
      for (int64_t k = 0; k < K; ++k)
        acc += static_cast<float>(A[i * K + k]) * static_cast<float>(B[k * N + j]);
      C[i * N + j] = T(acc);
    }
  }
}
