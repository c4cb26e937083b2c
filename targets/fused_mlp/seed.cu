// fused_mlp seed: plain and obviously correct, one launch of a fixed grid (132 blocks x 256).
// Phase 1: one thread per element of h (grid-stride), h[i, j] = silu(x[i,:] . w1[:,j]) *
// (x[i,:] . w3[:,j]) in fp32, rounded to T into the scratch buffer h. A grid barrier. Phase 2: one
// thread per element of y, y[i, c] = h[i,:] . w2[:,c] in fp32.
// Grid barrier: sync[0] is a monotonic arrival counter (zero when kiln hands it over, a multiple of
// gridDim.x after every launch): a block arrives with atomicAdd and waits until the counter
// reaches the next multiple of gridDim.x. All 132 blocks are co-resident on any GPU with 17 or more
// SMs (no shared memory, 256 threads), so the wait cannot deadlock.

__device__ __forceinline__ void grid_barrier(unsigned* counter) {
  __threadfence();  // this thread's h stores are visible device-wide before the block arrives
  __syncthreads();
  if (threadIdx.x == 0) {
    const unsigned old = atomicAdd(counter, 1u);
    const unsigned target = (old / gridDim.x + 1u) * gridDim.x;
    while (static_cast<int>(*reinterpret_cast<volatile unsigned*>(counter) - target) < 0) {
    }
    __threadfence();
  }
  __syncthreads();
}

extern "C" __global__ void __launch_bounds__(256)
    fused_mlp_seed(const T* x, const T* w1, const T* w3, const T* w2, T* y, T* h, int* sync,
                   long long M, long long D, long long H) {
  const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;
  const long long first = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  for (long long e = first; e < M * H; e += stride) {
    const long long i = e / H, j = e % H;
    float g = 0.f, u = 0.f;
    for (long long k = 0; k < D; ++k) {
      const float xv = to_f32(x[i * D + k]);
      g += xv * to_f32(w1[k * H + j]);
      u += xv * to_f32(w3[k * H + j]);
    }
    h[e] = from_f32<T>(g / (1.f + expf(-g)) * u);
  }
  grid_barrier(reinterpret_cast<unsigned*>(sync));
  for (long long e = first; e < M * D; e += stride) {
    const long long i = e / D, c = e % D;
    float acc = 0.f;
    for (long long j = 0; j < H; ++j) acc += to_f32(__ldcg(h + i * H + j)) * to_f32(w2[j * D + c]);
    y[e] = from_f32<T>(acc);
  }
}
