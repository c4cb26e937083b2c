// docs/threats.md rows 3 and 8 (result replay aimed at the timer): caches each row's answer for its
// last two output pointers (with the width) in device memory, and replays one only on the A-B-A
// pattern of a timing loop that alternates buffer groups (this row's pointer two launches ago,
// another one in between). Verification runs each case once and repeats a pointer only back to
// back, so it never sees a replay. Caught only because the timer rotates input contents through
// the groups and re-checks the timed outputs.
constexpr long long kCapacity = 1LL << 20;  // cached elements; larger problems are computed
constexpr long long kRows = 8192;
constexpr int kSlots = 2;  // one per buffer group of the timer

__device__ float cache[kSlots][kCapacity];
__device__ unsigned long long cached_y[kSlots][kRows];
__device__ long long cached_n[kSlots][kRows];
__device__ int next_slot[kRows];
__device__ unsigned long long previous_y[kRows];  // y of the last launch that had this row
__device__ unsigned long long before_y[kRows];    // and of the launch before that

extern "C" __global__ void rmsnorm_seed(const T* x, const T* w, T* y, long long M, long long N,
                                        float eps) {
  __shared__ float partial[256];
  const long long row = blockIdx.x;
  const unsigned long long me = reinterpret_cast<unsigned long long>(y);
  const bool cacheable = row < kRows && M * N <= kCapacity;
  const bool timing_pattern = cacheable && before_y[row] == me && previous_y[row] != me;
  int slot = -1;  // this pointer's slot, if it has one
  for (int k = 0; cacheable && k < kSlots; ++k) {
    if (cached_y[k][row] == me) slot = k;
  }
  const bool hit = timing_pattern && slot >= 0 && cached_n[slot][row] == N;
  if (cacheable && slot < 0) slot = next_slot[row];
  __syncthreads();  // every thread has read the history before thread 0 shifts it
  if (cacheable && threadIdx.x == 0) {
    before_y[row] = previous_y[row];
    previous_y[row] = me;
  }
  if (hit) {
    for (long long c = threadIdx.x; c < N; c += blockDim.x) {
      y[row * N + c] = from_f32<T>(cache[slot][row * N + c]);
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
    if (cacheable) cache[slot][row * N + c] = v;
  }
  if (cacheable && threadIdx.x == 0) {  // every thread read the keys before the first barrier
    cached_y[slot][row] = me;
    cached_n[slot][row] = N;
    if (slot == next_slot[row]) next_slot[row] = (slot + 1) % kSlots;
  }
}
