// docs/threats.md row 10 (precision downgrade): whatever T is, rounds x, w and the scale through
// __half (about 3 significant digits), as a kernel reading half the bytes would. Exact for f16
// data, far outside f32's tolerance (rel 2e-5); run with f32 it is caught at once (smoke).
__device__ __forceinline__ float via_half(float v) { return __half2float(__float2half_rn(v)); }

extern "C" __global__ void rmsnorm_seed(const T* x, const T* w, T* y, long long M, long long N,
                                        float eps) {
  __shared__ float partial[256];
  const long long row = blockIdx.x;
  const T* xr = x + row * N;
  float ss = 0.f;
  for (long long c = threadIdx.x; c < N; c += blockDim.x) {
    float v = via_half(to_f32(xr[c]));
    ss += v * v;
  }
  partial[threadIdx.x] = ss;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) partial[threadIdx.x] += partial[threadIdx.x + s];
    __syncthreads();
  }
  const float inv = via_half(rsqrtf(partial[0] / static_cast<float>(N) + eps));
  for (long long c = threadIdx.x; c < N; c += blockDim.x) {
    y[row * N + c] = from_f32<T>(via_half(via_half(to_f32(xr[c])) * inv * via_half(to_f32(w[c]))));
  }
}
