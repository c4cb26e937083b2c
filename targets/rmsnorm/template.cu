// rmsnorm template: one block of BLOCK threads per row; VEC elements per load (16-byte loads when
// VEC * sizeof(T) == 16) with a scalar path for rows whose length or alignment does not allow it;
// warp-shuffle reduction, then one shared-memory step across warps.
#ifndef BLOCK
#define BLOCK 256
#endif
#ifndef VEC
#define VEC 4
#endif

struct alignas(sizeof(T) * VEC) Vec { T v[VEC]; };

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ __forceinline__ float block_sum(float v) {
  __shared__ float warp_totals[BLOCK / 32 > 0 ? BLOCK / 32 : 1];
  __shared__ float total;
  v = warp_sum(v);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (BLOCK <= 32) return v;
  if (lane == 0) warp_totals[warp] = v;
  __syncthreads();
  if (warp == 0) {
    float t = lane < BLOCK / 32 ? warp_totals[lane] : 0.f;
    t = warp_sum(t);
    if (lane == 0) total = t;
  }
  __syncthreads();
  return total;
}

extern "C" __global__ void __launch_bounds__(BLOCK) rmsnorm(const T* __restrict__ x,
                                                            const T* __restrict__ w,
                                                            T* __restrict__ y, long long M,
                                                            long long N, float eps) {
  const long long row = blockIdx.x;
  const T* xr = x + row * N;
  T* yr = y + row * N;
  const bool vector_ok = (N % VEC == 0) &&
                         (reinterpret_cast<unsigned long long>(xr) % sizeof(Vec) == 0) &&
                         (reinterpret_cast<unsigned long long>(yr) % sizeof(Vec) == 0) &&
                         (reinterpret_cast<unsigned long long>(w) % sizeof(Vec) == 0);
  float ss = 0.f;
  if (vector_ok) {
    const Vec* xv = reinterpret_cast<const Vec*>(xr);
    for (long long i = threadIdx.x; i < N / VEC; i += BLOCK) {
      Vec a = xv[i];
#pragma unroll
      for (int k = 0; k < VEC; ++k) { float f = to_f32(a.v[k]); ss += f * f; }
    }
  } else {
    for (long long c = threadIdx.x; c < N; c += BLOCK) { float f = to_f32(xr[c]); ss += f * f; }
  }
  const float inv = rsqrtf(block_sum(ss) / static_cast<float>(N) + eps);
  if (vector_ok) {
    const Vec* xv = reinterpret_cast<const Vec*>(xr);
    const Vec* wv = reinterpret_cast<const Vec*>(w);
    Vec* yv = reinterpret_cast<Vec*>(yr);
    for (long long i = threadIdx.x; i < N / VEC; i += BLOCK) {
      Vec a = xv[i], b = wv[i], o;
#pragma unroll
      for (int k = 0; k < VEC; ++k) o.v[k] = from_f32<T>(to_f32(a.v[k]) * inv * to_f32(b.v[k]));
      yv[i] = o;
    }
  } else {
    for (long long c = threadIdx.x; c < N; c += BLOCK) {
      yr[c] = from_f32<T>(to_f32(xr[c]) * inv * to_f32(w[c]));
    }
  }
}
