// docs/threats.md row 12 (right only at friendly shapes): works in whole chunks of 256 elements
// (one per thread) and has no tail. Every benchmark, smoke and sweep width of rmsnorm is a multiple
// of 256, so only the edge shapes (N = 1, 3, 65, 1031, 4099) expose it: the tail stays unwritten.
constexpr long long kChunk = 256;

extern "C" __global__ void rmsnorm_seed(const T* x, const T* w, T* y, long long M, long long N,
                                        float eps) {
  __shared__ float partial[256];
  const long long row = blockIdx.x;
  const long long full = N / kChunk * kChunk;
  const T* xr = x + row * N;
  float ss = 0.f;
  for (long long c = threadIdx.x; c < full; c += blockDim.x) {
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
  for (long long c = threadIdx.x; c < full; c += blockDim.x) {
    y[row * N + c] = from_f32<T>(to_f32(xr[c]) * inv * to_f32(w[c]));
  }
}
