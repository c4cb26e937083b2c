// Attention seed (cuda): one block of 128 threads (4 warps) per (b, h, query row i), plainly the
// reference's formula in float. Scores s_j = scale * <q_i, k_j> are computed by one warp per key
// (lanes split d, shuffle sum). Pass 1: m = max of the visible scores (fmaxf skips NaN). Pass 2,
// per chunk of 128 keys: p_j = exp(s_j - m) into shared memory, then each thread owns one output
// column d and accumulates sum_j p_j v[j][d] and sum_j p_j; o = acc / sum. Columns beyond 128 are
// done in further rounds (scores recomputed). Masked keys (j > i when MASK == 2) are never visited.
#define SEED_THREADS 128
#define SEED_CHUNK 128
#define NEG_INF (-__int_as_float(0x7f800000))

__device__ __forceinline__ float warp_sum(float x) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}

// The score of key row kj for query row qi, identical in every lane of the warp.
__device__ __forceinline__ float score(const T* qi, const T* kj, long long D, float scale, int lane) {
  float dot = 0.f;
  for (long long d = lane; d < D; d += 32) dot += to_f32(qi[d]) * to_f32(kj[d]);
  return scale * warp_sum(dot);
}

extern "C" __global__ void __launch_bounds__(SEED_THREADS)
flash_attention_seed(const T* q, const T* k, const T* v, T* o, long long B, long long H,
                     long long L, long long D, long long MASK, float scale) {
  __shared__ float red[SEED_THREADS / 32];
  __shared__ float p[SEED_CHUNK];
  const long long row = blockIdx.x;  // (b * H + h) * L + i
  const long long bh = row / L, i = row % L;
  const T* qi = q + row * D;
  const T* kb = k + bh * L * D;
  const T* vb = v + bh * L * D;
  T* oi = o + row * D;
  const long long n = MASK == 2 ? i + 1 : L;  // visible keys 0 .. n-1
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;

  // Pass 1: the row maximum.
  float m = NEG_INF;
  for (long long j = warp; j < n; j += SEED_THREADS / 32) m = fmaxf(m, score(qi, kb + j * D, D, scale, lane));
  if (lane == 0) red[warp] = m;
  __syncthreads();
  m = NEG_INF;
  for (int w = 0; w < SEED_THREADS / 32; ++w) m = fmaxf(m, red[w]);

  // Pass 2: weights chunk by chunk; each thread accumulates one output column.
  for (long long d0 = 0; d0 < D; d0 += SEED_THREADS) {
    const long long d = d0 + threadIdx.x;
    float acc = 0.f, sum = 0.f;
    for (long long j0 = 0; j0 < n; j0 += SEED_CHUNK) {
      const int cn = (int)(n - j0 < SEED_CHUNK ? n - j0 : SEED_CHUNK);
      __syncthreads();  // the previous chunk's weights are consumed
      for (int jj = warp; jj < cn; jj += SEED_THREADS / 32) {
        const float s = score(qi, kb + (j0 + jj) * D, D, scale, lane);
        if (lane == 0) p[jj] = expf(s - m);
      }
      __syncthreads();
      for (int jj = 0; jj < cn; ++jj) {
        sum += p[jj];
        if (d < D) acc += p[jj] * to_f32(vb[(j0 + jj) * D + d]);
      }
    }
    if (d < D) oi[d] = from_f32<T>(acc / sum);
  }
}
