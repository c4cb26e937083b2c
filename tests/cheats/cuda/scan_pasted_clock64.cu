// docs/threats.md row 7 (timer access), past the text scan: reads the SM cycle counter, which keeps
// counting across launches and so times them, through clock64() named by token pasting
// (KILN_CAT(clo, ck64)). Refused at compile by the scan of the generated PTX (ptx:%clock64).
#define KILN_CAT(a, b) a##b

extern "C" __global__ void rmsnorm_seed(const T* x, const T* w, T* y, long long M, long long N,
                                        float eps) {
  if (KILN_CAT(clo, ck64)() == 0) return;
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
