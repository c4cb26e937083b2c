// layernorm seed: one block of 256 threads per row, fp32 arithmetic, three passes over the row in
// global memory with a shared-memory tree reduction after each of the first two. The row is
// shifted by its first element (d = x - x[0]) so that rows of equal values give d = 0, variance 0
// and y = b exactly; then mean(d), var = mean((d - mean(d))^2) (two-pass, no cancellation), and
// y = (d - mean(d)) * rsqrt(var + eps) * w + b. Plain and obviously correct.
__device__ float block_sum_256(float v, float* partial) {
  partial[threadIdx.x] = v;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) partial[threadIdx.x] += partial[threadIdx.x + s];
    __syncthreads();
  }
  const float total = partial[0];
  __syncthreads();  // everyone has read partial[0] before the next reduction overwrites it
  return total;
}

extern "C" __global__ void layernorm_seed(const T* x, const T* w, const T* b, T* y, long long M,
                                          long long N, float eps) {
  __shared__ float partial[256];
  const long long row = blockIdx.x;
  const T* xr = x + row * N;
  T* yr = y + row * N;
  const float k = to_f32(xr[0]);
  float s = 0.f;
  for (long long c = threadIdx.x; c < N; c += blockDim.x) s += to_f32(xr[c]) - k;
  const float mean = block_sum_256(s, partial) / static_cast<float>(N);
  float ss = 0.f;
  for (long long c = threadIdx.x; c < N; c += blockDim.x) {
    const float d = (to_f32(xr[c]) - k) - mean;
    ss += d * d;
  }
  const float var = block_sum_256(ss, partial) / static_cast<float>(N);
  const float inv = rsqrtf(var + eps);
  for (long long c = threadIdx.x; c < N; c += blockDim.x) {
    const float d = (to_f32(xr[c]) - k) - mean;
    yr[c] = from_f32<T>(d * inv * to_f32(w[c]) + to_f32(b[c]));
  }
}
