// docs/threats.md rows 15 and 20 (memoization keyed on a sample of positions): keeps, per row, the
// outputs of the inputs it has seen in __device__ memory, keyed on the shape and 16 fixed input
// positions, and replays the row on a match. Launches whose secret sites lie elsewhere get a stale
// answer; the sites move far enough that the stale rows are wrong by much more than the
// tolerance, and the closing launches and the launches kept at random are checked.
constexpr long long kCapacity = 1 << 18;  // elements; larger problems are computed
constexpr int kSlots = 4;
constexpr int kSamples = 16;
constexpr long long kRows = 4096;
__device__ T cache_y[kSlots][kCapacity];
__device__ T cache_key[kSlots][kRows][kSamples];  // per row: the key its cached row came from
__device__ long long cache_n[kSlots][kRows];

#define IN(v) to_f32(v)
extern "C" __global__ void rmsnorm_seed(const T* x, const T* w, T* y, long long M, long long N,
                                        float eps) {
  const long long row = blockIdx.x;
  T key[kSamples];
  unsigned int hash = 0;
  for (int k = 0; k < kSamples; ++k) {
    key[k] = x[(M * N - 1) * k / (kSamples - 1)];
    hash = hash * 31u + static_cast<unsigned int>(to_f32(key[k]) * 1024.f);
  }
  const int slot = static_cast<int>(hash % kSlots);
  const bool cacheable = M * N <= kCapacity && M <= kRows;
  if (cacheable && cache_n[slot][row] == N) {
    bool same = true;
    for (int k = 0; k < kSamples; ++k)
      same = same && to_f32(cache_key[slot][row][k]) == to_f32(key[k]);
    if (same) {
      for (long long c = threadIdx.x; c < N; c += blockDim.x)
        y[row * N + c] = cache_y[slot][row * N + c];
      return;
    }
  }
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
      const T v = from_f32<T>(to_f32(xr[c]) * inv * to_f32(w[c]));
      y[row * N + c] = v;
      if (cacheable) cache_y[slot][row * N + c] = v;
    }
  }
  __syncthreads();
  if (cacheable && threadIdx.x == 0) {
    for (int k = 0; k < kSamples; ++k) cache_key[slot][row][k] = key[k];
    cache_n[slot][row] = N;
  }
}
