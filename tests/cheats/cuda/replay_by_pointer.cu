// docs/threats.md row 3 (result caching in a __device__ buffer): keeps the last answer of each row
// per output pointer and width in device memory and replays it whenever the same (y, N) comes back,
// without looking at x. Caught in verification: consecutive cases of one shape get the same
// buffers (the sandbox pools them by size) with new contents, so the second adversarial case
// receives a stale answer.
constexpr long long kCapacity = 1LL << 20;  // cached elements; larger problems are computed
constexpr long long kRows = 8192;

__device__ float cache[kCapacity];
__device__ unsigned long long cached_y[kRows];
__device__ long long cached_n[kRows];

extern "C" __global__ void rmsnorm_seed(const T* x, const T* w, T* y, long long M, long long N,
                                        float eps) {
  __shared__ float partial[256];
  const long long row = blockIdx.x;
  const bool cacheable = row < kRows && M * N <= kCapacity;
  const bool hit = cacheable && cached_y[row] == reinterpret_cast<unsigned long long>(y) &&
                   cached_n[row] == N;
  if (hit) {
    for (long long c = threadIdx.x; c < N; c += blockDim.x) {
      y[row * N + c] = from_f32<T>(cache[row * N + c]);
    }
    return;
  }
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
    const float v = to_f32(xr[c]) * inv * to_f32(w[c]);
    y[row * N + c] = from_f32<T>(v);
    if (cacheable) cache[row * N + c] = v;
  }
  if (cacheable && threadIdx.x == 0) {  // every thread read the key before the reduction
    cached_y[row] = reinterpret_cast<unsigned long long>(y);
    cached_n[row] = N;
  }
}
