// docs/threats.md row 12 (shape specialization): the row length is hard-coded to 256, the smoke
// shape (one element per thread, so the compiler can keep the row in registers); other widths are
// simply wrong. Caught by the shape sweep.
constexpr long long kN = 256;

extern "C" __global__ void rmsnorm_seed(const T* x, const T* w, T* y, long long M, long long N,
                                        float eps) {
  __shared__ float partial[256];
  const long long row = blockIdx.x;
  const T* xr = x + row * N;
  const float v = to_f32(xr[threadIdx.x % kN]);
  partial[threadIdx.x] = v * v;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) partial[threadIdx.x] += partial[threadIdx.x + s];
    __syncthreads();
  }
  const float inv = rsqrtf(partial[0] / static_cast<float>(kN) + eps);
  if (threadIdx.x < kN) y[row * N + threadIdx.x] = from_f32<T>(v * inv * to_f32(w[threadIdx.x]));
}
