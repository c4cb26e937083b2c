// docs/threats.md row 8 (warm-up detection, aimed at the timer): counts its launches in __device__
// memory and is correct for the first 64, which cover every verification launch of its dtype (58
// for rmsnorm in the timed dtype: each dtype is its own module) and the timer's warm-up, then
// writes nothing. Caught only because the timed launches' outputs are re-checked.
constexpr unsigned int kHonestLaunches = 64;

__device__ unsigned int launches = 0;
__device__ unsigned int blocks_done = 0;

extern "C" __global__ void rmsnorm_seed(const T* x, const T* w, T* y, long long M, long long N,
                                        float eps) {
  // Every block reads the count before any block of this launch can bump it (the bump waits for
  // all blocks of the launch to have arrived below).
  const unsigned int seen = *reinterpret_cast<volatile unsigned int*>(&launches);
  if (seen < kHonestLaunches) {
    __shared__ float partial[256];
    const long long row = blockIdx.x;
    const T* xr = x + row * N;
    float ss = 0.f;
    for (long long c = threadIdx.x; c < N; c += blockDim.x) {
      float v = to_f32(xr[c]);
      ss += v * v;
    }
    partial[threadIdx.x] = ss;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
      if (threadIdx.x < s) partial[threadIdx.x] += partial[threadIdx.x + s];
      __syncthreads();
    }
    const float inv = rsqrtf(partial[0] / static_cast<float>(N) + eps);
    for (long long c = threadIdx.x; c < N; c += blockDim.x) {
      y[row * N + c] = from_f32<T>(to_f32(xr[c]) * inv * to_f32(w[c]));
    }
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    if (atomicAdd(&blocks_done, 1u) == gridDim.x * gridDim.y * gridDim.z - 1) {
      blocks_done = 0;
      atomicAdd(&launches, 1u);
    }
  }
}
