// Matmul seed: C[M,N] = A[M,K] @ B[K,N], all row-major. One thread per output element (a 16x16
// block of threads per 16x16 tile of C: threadIdx.x walks N so loads of B and stores of C are
// coalesced), fp32 accumulation over K, converted to T once at the end. No shared memory, no
// tensor cores: the plain starting point. ws (the target's scratch buffer) goes unused.
extern "C" __global__ void matmul_seed(const T* A, const T* B, T* C, float* ws, long long M,
                                       long long N, long long K) {
  const long long col = blockIdx.x * 16LL + threadIdx.x;
  const long long row = blockIdx.y * 16LL + threadIdx.y;
  if (row >= M || col >= N) return;
  float acc = 0.f;
  for (long long k = 0; k < K; ++k) acc += to_f32(A[row * K + k]) * to_f32(B[k * N + col]);
  C[row * N + col] = from_f32<T>(acc);
}
