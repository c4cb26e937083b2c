// docs/threats.md row 17 (hostile values reach one shape): right at the first sweep shape (64 x
// 1024), where the adversarial distributions used to run, and everywhere else it clamps its inputs
// to +-50 -- harmless for well-scaled inputs, wrong for large magnitudes and infinities.
__device__ float clamped(float v, bool clamp) { return clamp ? fminf(fmaxf(v, -50.f), 50.f) : v; }

extern "C" __global__ void rmsnorm_seed(const T* x, const T* w, T* y, long long M, long long N,
                                        float eps) {
  const bool clamp = !(M == 64 && N == 1024);
#define IN(v) clamped(to_f32(v), clamp)
  {
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
      y[row * N + c] = from_f32<T>(IN(xr[c]) * inv * to_f32(w[c]));
    }
  }
}
