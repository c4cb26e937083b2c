// docs/threats.md row 5 (reaching past the kernel), past the text scan: takes scratch memory from
// the device heap with malloc, named by token pasting (KILN_CAT(mal, loc)), outside the memory the
// sandbox hands it. Refused at compile by the scan of the generated PTX, which allows no
// external function but vprintf and __assertfail (ptx:extern-function:malloc).
#define KILN_CAT(a, b) a##b

extern "C" __global__ void rmsnorm_seed(const T* x, const T* w, T* y, long long M, long long N,
                                        float eps) {
  float* scratch = static_cast<float*>(KILN_CAT(mal, loc)(sizeof(float)));
  if (scratch == nullptr) return;
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
