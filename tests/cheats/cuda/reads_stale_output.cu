// docs/threats.md row 11 (reading memory it never wrote): before writing each output element it
// reads that element's old contents and lets their lowest bit nudge the result by one ulp. Every
// answer is within tolerance, but what it writes depends on what the buffer held. Caught by the
// determinism stage: the same inputs under another poison pattern give different bits.
__device__ __forceinline__ float flip_low_bit(float v, unsigned bit) {
  return __uint_as_float(__float_as_uint(v) ^ bit);
}
__device__ __forceinline__ __half flip_low_bit(__half v, unsigned bit) {
  return __ushort_as_half(__half_as_ushort(v) ^ static_cast<unsigned short>(bit));
}
__device__ __forceinline__ __nv_bfloat16 flip_low_bit(__nv_bfloat16 v, unsigned bit) {
  return __ushort_as_bfloat16(__bfloat16_as_ushort(v) ^ static_cast<unsigned short>(bit));
}

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
  const float inv = rsqrtf(partial[0] / static_cast<float>(N) + eps);
  for (long long c = threadIdx.x; c < N; c += blockDim.x) {
    const unsigned stale = reinterpret_cast<const unsigned char*>(y + row * N + c)[0] & 1u;
    T v = from_f32<T>(to_f32(xr[c]) * inv * to_f32(w[c]));
    const bool finite = (__float_as_uint(to_f32(v)) & 0x7f800000u) != 0x7f800000u;
    if (finite) v = flip_low_bit(v, stale);  // a flipped infinity would turn into NaN
    y[row * N + c] = v;
  }
}
