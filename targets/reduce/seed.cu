// Row-sum seed: one block per row, fp32 accumulation, shared-memory tree reduction.
extern "C" __global__ void reduce_seed(const T* x, T* y, long long M, long long N) {
  __shared__ float partial[256];
  const long long row = blockIdx.x;
  float s = 0.f;
  for (long long c = threadIdx.x; c < N; c += blockDim.x) s += to_f32(x[row * N + c]);
  partial[threadIdx.x] = s;
  __syncthreads();
  for (int k = blockDim.x / 2; k > 0; k >>= 1) {
    if (threadIdx.x < k) partial[threadIdx.x] += partial[threadIdx.x + k];
    __syncthreads();
  }
  if (threadIdx.x == 0) y[row] = from_f32<T>(partial[0]);
}
