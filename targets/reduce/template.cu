// Row-sum template: ROWS rows per block, BLOCK/ROWS threads per row (a warp or more), VEC elements
// per load with a scalar path for unaligned or ragged rows, warp-shuffle reductions.
#ifndef BLOCK
#define BLOCK 256
#endif
#ifndef VEC
#define VEC 4
#endif
#ifndef ROWS
#define ROWS 1
#endif

#define THREADS_PER_ROW (BLOCK / ROWS)
#define WARPS_PER_ROW (THREADS_PER_ROW / 32)

struct alignas(sizeof(T) * VEC) Vec { T v[VEC]; };

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

extern "C" __global__ void __launch_bounds__(BLOCK) reduce(const T* __restrict__ x,
                                                           T* __restrict__ y, long long M,
                                                           long long N) {
  __shared__ float warp_totals[BLOCK / 32];
  const int local_row = threadIdx.x / THREADS_PER_ROW;
  const int t = threadIdx.x % THREADS_PER_ROW;
  const long long row = static_cast<long long>(blockIdx.x) * ROWS + local_row;
  float s = 0.f;
  if (row < M) {
    const T* xr = x + row * N;
    const bool vector_ok =
        (N % VEC == 0) && (reinterpret_cast<unsigned long long>(xr) % sizeof(Vec) == 0);
    if (vector_ok) {
      const Vec* xv = reinterpret_cast<const Vec*>(xr);
      for (long long i = t; i < N / VEC; i += THREADS_PER_ROW) {
        Vec a = xv[i];
#pragma unroll
        for (int k = 0; k < VEC; ++k) s += to_f32(a.v[k]);
      }
    } else {
      for (long long c = t; c < N; c += THREADS_PER_ROW) s += to_f32(xr[c]);
    }
  }
  s = warp_sum(s);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) warp_totals[warp] = s;
  __syncthreads();
  if (t == 0 && row < M) {
    float total = 0.f;
    for (int k = 0; k < WARPS_PER_ROW; ++k) total += warp_totals[local_row * WARPS_PER_ROW + k];
    y[row] = from_f32<T>(total);
  }
}
