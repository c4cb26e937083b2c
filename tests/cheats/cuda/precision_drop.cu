// docs/threats.md row 10 (a precision drop just inside the tolerance), timed in f32: the 1/rms
// factor keeps only 17 bits of its significand, as a cruder approximation would -- about 8e-6
// relative, which the f32 tolerance (2e-5) admits, but tens of times the seed's error on the same
// inputs.
extern "C" __global__ void rmsnorm_seed(const T* x, const T* w, T* y, long long M, long long N,
                                        float eps) {
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
  const float inv =
      __uint_as_float(__float_as_uint(rsqrtf(partial[0] / static_cast<float>(N) + eps)) & ~0x3Fu);
  for (long long c = threadIdx.x; c < N; c += blockDim.x) {
    y[row * N + c] = from_f32<T>(to_f32(xr[c]) * inv * to_f32(w[c]));
  }
}
