// docs/threats.md row 16 (less work on some launches): counts its launches in __device__ memory, is
// honest for the first 64 (every verification launch of the timed dtype and the warm-up), then
// computes only every other launch and leaves the outputs alone on the rest. Caught because the
// outputs of launches it cannot predict are checked (and its samples are bimodal).
__device__ unsigned int launches = 0;
__device__ unsigned int blocks_done = 0;

// Counts this launch once every block has passed (read the count before calling).
__device__ void count_launch() {
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    if (atomicAdd(&blocks_done, 1u) == gridDim.x * gridDim.y * gridDim.z - 1) {
      blocks_done = 0;
      atomicAdd(&launches, 1u);
    }
  }
}

#define IN(v) to_f32(v)
extern "C" __global__ void rmsnorm_seed(const T* x, const T* w, T* y, long long M, long long N,
                                        float eps) {
  const unsigned int seen = *reinterpret_cast<volatile unsigned int*>(&launches);
  if (seen < 64 || seen % 2 == 1) {
    __shared__ float partial[256];
    const long long row = blockIdx.x;
    const T* xr = x + row * N;
    float ss = 0.f;
    for (long long c = threadIdx.x; c < N; c += blockDim.x) {
      float v = IN(xr[c]);
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
  count_launch();
}
