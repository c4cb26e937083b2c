// docs/threats.md row 3 (result caching keyed on a sample of the contents): remembers two answers
// per row in device memory, keyed on the width and on a handful of sampled elements of the row, and
// replays one (a copy instead of the reduction) whenever the sample matches. It never returns a
// wrong answer for inputs it has not seen; it only skips work where the same contents come back,
// as they do when the timer rotates a fixed number of input sets through its launches.
constexpr long long kCapacity = 1LL << 20;  // cached elements per slot; larger problems compute
constexpr long long kRows = 8192;
constexpr int kSlots = 2;
constexpr int kSamples = 4;

struct Key {
  long long n;
  float sample[kSamples + 1];
};

__device__ float cache[kSlots][kCapacity];
__device__ Key keys[kSlots][kRows];
__device__ int next_slot[kRows];

__device__ bool same(const Key& a, const Key& b) {
  if (a.n != b.n) return false;
  for (int k = 0; k <= kSamples; ++k) {
    if (__float_as_uint(a.sample[k]) != __float_as_uint(b.sample[k])) return false;
  }
  return true;
}

extern "C" __global__ void rmsnorm_seed(const T* x, const T* w, T* y, long long M, long long N,
                                        float eps) {
  __shared__ float partial[256];
  const long long row = blockIdx.x;
  const T* xr = x + row * N;
  const bool cacheable = row < kRows && M * N <= kCapacity;
  Key key;
  key.n = N;
  for (int k = 0; k < kSamples; ++k) key.sample[k] = to_f32(xr[(N - 1) * k / (kSamples - 1)]);
  key.sample[kSamples] = to_f32(w[0]);
  int hit = -1;
  for (int s = 0; cacheable && s < kSlots; ++s) {
    if (same(keys[s][row], key)) hit = s;
  }
  if (hit >= 0) {
    for (long long c = threadIdx.x; c < N; c += blockDim.x) {
      y[row * N + c] = from_f32<T>(cache[hit][row * N + c]);
    }
    return;
  }
  float ss = 0.f;
  for (long long c = threadIdx.x; c < N; c += blockDim.x) {
    float v = to_f32(xr[c]);
    ss += v * v;
  }
  partial[threadIdx.x] = ss;
  __syncthreads();  // also: every thread has compared the keys before thread 0 replaces one
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) partial[threadIdx.x] += partial[threadIdx.x + s];
    __syncthreads();
  }
  const float inv = rsqrtf(partial[0] / static_cast<float>(N) + eps);
  const int slot = cacheable ? next_slot[row] : 0;
  for (long long c = threadIdx.x; c < N; c += blockDim.x) {
    const float v = to_f32(xr[c]) * inv * to_f32(w[c]);
    y[row * N + c] = from_f32<T>(v);
    if (cacheable) cache[slot][row * N + c] = v;
  }
  __syncthreads();  // every thread has read next_slot
  if (cacheable && threadIdx.x == 0) {
    keys[slot][row] = key;
    next_slot[row] = (slot + 1) % kSlots;
  }
}
