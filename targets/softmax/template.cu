// Softmax template: one block of BLOCK threads per row; one pass computes max and sum together
// (online softmax: the running sum is rescaled when the maximum grows), a second pass writes.
// VEC elements per load (16-byte loads at VEC * sizeof(T) == 16), scalar path for ragged rows.
#ifndef BLOCK
#define BLOCK 256
#endif
#ifndef VEC
#define VEC 4
#endif

struct alignas(sizeof(T) * VEC) Vec { T v[VEC]; };

#define NEG_INF (-__int_as_float(0x7f800000))  // NVRTC has no math.h

// Merges (m, s) pairs: the sum of exp(x - m) over the union, expressed at the larger maximum.
__device__ __forceinline__ void merge(float& m, float& s, float m2, float s2) {
  const float mm = fmaxf(m, m2);
  if (mm == NEG_INF) return;  // both empty
  s = s * expf(m - mm) + s2 * expf(m2 - mm);
  m = mm;
}

__device__ __forceinline__ void add(float& m, float& s, float v) {
  if (v == NEG_INF) return;  // exp(-Inf - m) is 0; computing it would give NaN while m is -Inf
  if (v > m) {
    // expf(v - v) is 1, or NaN for v = +Inf: Inf - Inf poisons the row, as in the reference.
    s = s * expf(m - v) + expf(v - v);
    m = v;
  } else {
    s += expf(v - m);
  }
}

extern "C" __global__ void __launch_bounds__(BLOCK) softmax(const T* __restrict__ x,
                                                            T* __restrict__ y, long long M,
                                                            long long N) {
  __shared__ float sm[BLOCK / 32], ss[BLOCK / 32];
  const T* xr = x + blockIdx.x * N;
  T* yr = y + blockIdx.x * N;
  const bool vector_ok = (N % VEC == 0) &&
                         (reinterpret_cast<unsigned long long>(xr) % sizeof(Vec) == 0) &&
                         (reinterpret_cast<unsigned long long>(yr) % sizeof(Vec) == 0);
  float m = NEG_INF, s = 0.f;
  if (vector_ok) {
    const Vec* xv = reinterpret_cast<const Vec*>(xr);
    for (long long i = threadIdx.x; i < N / VEC; i += BLOCK) {
      Vec a = xv[i];
#pragma unroll
      for (int k = 0; k < VEC; ++k) add(m, s, to_f32(a.v[k]));
    }
  } else {
    for (long long c = threadIdx.x; c < N; c += BLOCK) add(m, s, to_f32(xr[c]));
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float m2 = __shfl_xor_sync(0xffffffffu, m, o), s2 = __shfl_xor_sync(0xffffffffu, s, o);
    merge(m, s, m2, s2);
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) { sm[warp] = m; ss[warp] = s; }
  __syncthreads();
  m = NEG_INF;
  s = 0.f;
  for (int w = 0; w < BLOCK / 32; ++w) merge(m, s, sm[w], ss[w]);
  const float inv = 1.f / s;
  if (vector_ok) {
    const Vec* xv = reinterpret_cast<const Vec*>(xr);
    Vec* yv = reinterpret_cast<Vec*>(yr);
    for (long long i = threadIdx.x; i < N / VEC; i += BLOCK) {
      Vec a = xv[i], o;
#pragma unroll
      for (int k = 0; k < VEC; ++k) o.v[k] = from_f32<T>(expf(to_f32(a.v[k]) - m) * inv);
      yv[i] = o;
    }
  } else {
    for (long long c = threadIdx.x; c < N; c += BLOCK) {
      yr[c] = from_f32<T>(expf(to_f32(xr[c]) - m) * inv);
    }
  }
}
