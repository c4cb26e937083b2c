// docs/threats.md row 18 (writes outside its outputs): right, but the last block also stores into
// the two elements just past the end of y. The guard regions around every buffer catch it, naming
// the buffer and how far past its end.
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
    y[row * N + c] = from_f32<T>(to_f32(xr[c]) * inv * to_f32(w[c]));
  }
  if (row == M - 1 && threadIdx.x < 2) y[M * N + threadIdx.x] = from_f32<T>(0.f);
}
