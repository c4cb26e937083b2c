// docs/threats.md row 7 (timer access): reads the global nanosecond timer from inline PTX, its name
// split across two adjacent string literals ("%%global" "timer;") that the compiler joins into
// one. Rejected by the text scan, which joins adjacent literals as the compiler does
// (timer:globaltimer).
extern "C" __global__ void rmsnorm_seed(const T* x, const T* w, T* y, long long M, long long N,
                                        float eps) {
  unsigned long long now;
  asm volatile("mov.u64 %0, %%global" "timer;" : "=l"(now));
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
