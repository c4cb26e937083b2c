// Softmax seed: one block of 256 threads per row, three passes over the row (max, sum of
// exponentials, write), fp32 arithmetic, shared-memory tree reductions.
extern "C" __global__ void softmax_seed(const T* x, T* y, long long M, long long N) {
  __shared__ float partial[256];
  const T* xr = x + blockIdx.x * N;
  T* yr = y + blockIdx.x * N;
  float m = -__int_as_float(0x7f800000);  // -Inf (NVRTC has no math.h)
  for (long long c = threadIdx.x; c < N; c += blockDim.x) m = fmaxf(m, to_f32(xr[c]));
  partial[threadIdx.x] = m;
  __syncthreads();
  for (int k = blockDim.x / 2; k > 0; k >>= 1) {
    if (threadIdx.x < k) partial[threadIdx.x] = fmaxf(partial[threadIdx.x], partial[threadIdx.x + k]);
    __syncthreads();
  }
  const float row_max = partial[0];
  __syncthreads();
  float s = 0.f;
  for (long long c = threadIdx.x; c < N; c += blockDim.x) s += expf(to_f32(xr[c]) - row_max);
  partial[threadIdx.x] = s;
  __syncthreads();
  for (int k = blockDim.x / 2; k > 0; k >>= 1) {
    if (threadIdx.x < k) partial[threadIdx.x] += partial[threadIdx.x + k];
    __syncthreads();
  }
  const float inv = 1.f / partial[0];
  for (long long c = threadIdx.x; c < N; c += blockDim.x) {
    yr[c] = from_f32<T>(expf(to_f32(xr[c]) - row_max) * inv);
  }
}
