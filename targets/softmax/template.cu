// Softmax template. ROWS rows per block of BLOCK threads, TPR = BLOCK / ROWS threads per row, one
// row per thread group (the grid in target.json covers every row).
// Register path (16-byte aligned x and y, N % VEC == 0 with VEC = 16 / sizeof(T), N <= TPR *
// ELEMS): each thread issues ELEMS / VEC fully unrolled 16-byte loads that stay in registers, so
// x is read from memory once (slots past the row hold -Inf). The thread's max is taken on packed
// pairs for 2-byte types (__hmax2 skips NaN like std::fmax); the row max, then the sum of
// p = exp2((x - max) * log2 e) are reduced in fp32 with warp shuffles plus, when a row spans
// several warps, one shared-memory step each; p stays in fp32 registers and y = p * (1 / sum)
// leaves with 16-byte stores. Other rows (longer than TPR * ELEMS, ragged or misaligned) take a
// looped path: online softmax (max and rescaled sum in one pass), then a second pass that
// re-reads x and writes; 16-byte vectors when aligned, else scalar.
// HINT (register path): 0 plain loads and stores; 1 loads of x with an L2 evict-first policy
// (createpolicy + L2::cache_hint) and no L1 allocation; 2 as 1 and stores of y evict-first too;
// 3 ld.global.cs / st.global.cs (streaming). BPS > 0: __launch_bounds__(BLOCK, BPS).
#ifndef BLOCK
#define BLOCK 256
#endif
#ifndef ELEMS
#define ELEMS 32
#endif
#ifndef ROWS
#define ROWS 1
#endif
#ifndef HINT
#define HINT 0
#endif
#ifndef BPS
#define BPS 0
#endif

constexpr int kVec = 16 / static_cast<int>(sizeof(T));  // elements per 16-byte vector
constexpr int kTpr = BLOCK / ROWS;                       // threads per row
constexpr int kLoads = ELEMS / kVec;                     // 16-byte loads per thread (register path)
constexpr int kWarpsPerRow = kTpr >= 32 ? kTpr / 32 : 1;
constexpr int kGroup = kTpr < 32 ? kTpr : 32;            // lanes that shuffle together
static_assert(BLOCK % 32 == 0 && BLOCK % ROWS == 0 && (kTpr & (kTpr - 1)) == 0,
              "BLOCK a multiple of 32, TPR a power of two");
static_assert(ELEMS % kVec == 0 && kLoads >= 1, "ELEMS must be a multiple of 16 / sizeof(T)");

struct alignas(16) Pack { T v[kVec]; };

#define NEG_INF (-__int_as_float(0x7f800000))  // NVRTC has no math.h
#define LOG2E 1.4426950408889634f

__device__ __forceinline__ unsigned long long evict_first_policy() {
  unsigned long long p = 0;
#if HINT == 1 || HINT == 2
  asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(p));
#endif
  return p;
}

__device__ __forceinline__ Pack load_x(const Pack* p, unsigned long long policy) {
#if HINT == 1 || HINT == 2
  uint4 u;
  asm("ld.global.nc.L1::no_allocate.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;"
      : "=r"(u.x), "=r"(u.y), "=r"(u.z), "=r"(u.w)
      : "l"(p), "l"(policy));
  return *reinterpret_cast<const Pack*>(&u);
#elif HINT == 3
  const uint4 u = __ldcs(reinterpret_cast<const uint4*>(p));
  return *reinterpret_cast<const Pack*>(&u);
#else
  return *p;
#endif
}

__device__ __forceinline__ void store_y(Pack* p, const Pack& v, unsigned long long policy) {
#if HINT == 2
  const uint4 u = *reinterpret_cast<const uint4*>(&v);
  asm volatile("st.global.L2::cache_hint.v4.u32 [%0], {%1, %2, %3, %4}, %5;"
               :: "l"(p), "r"(u.x), "r"(u.y), "r"(u.z), "r"(u.w), "l"(policy) : "memory");
#elif HINT == 3
  __stcs(reinterpret_cast<uint4*>(p), *reinterpret_cast<const uint4*>(&v));
#else
  *p = v;
#endif
}

// Row max / sum over the kTpr threads of a row. Every thread of the block must call these (they
// hold a __syncthreads when a row spans several warps; max and sum use different scratch).
__device__ __forceinline__ float group_max(float v, float* scratch) {
#pragma unroll
  for (int o = kGroup / 2; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  if constexpr (kTpr > 32) {
    const int warp = threadIdx.x >> 5;
    if ((threadIdx.x & 31) == 0) scratch[warp] = v;
    __syncthreads();
    const float* mine = scratch + (warp / kWarpsPerRow) * kWarpsPerRow;
    v = mine[0];
#pragma unroll
    for (int k = 1; k < kWarpsPerRow; ++k) v = fmaxf(v, mine[k]);
  }
  return v;
}

__device__ __forceinline__ float group_sum(float v, float* scratch) {
#pragma unroll
  for (int o = kGroup / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  if constexpr (kTpr > 32) {
    const int warp = threadIdx.x >> 5;
    if ((threadIdx.x & 31) == 0) scratch[warp] = v;
    __syncthreads();
    const float* mine = scratch + (warp / kWarpsPerRow) * kWarpsPerRow;
    v = mine[0];
#pragma unroll
    for (int k = 1; k < kWarpsPerRow; ++k) v += mine[k];
  }
  return v;
}

// Max of a thread's elements: on packed pairs for 2-byte types, so no element is converted twice.
template <typename U> struct PairOf { using type = U; };
template <> struct PairOf<__half> { using type = __half2; };
template <> struct PairOf<__nv_bfloat16> { using type = __nv_bfloat162; };

template <typename U = T>
__device__ __forceinline__ float thread_max(const Pack (&raw)[kLoads]) {
  if constexpr (sizeof(U) == 2) {
    using T2 = typename PairOf<U>::type;
    T2 m2 = *reinterpret_cast<const T2*>(&raw[0].v[0]);
#pragma unroll
    for (int j = 0; j < kLoads; ++j) {
#pragma unroll
      for (int k = (j == 0 ? 2 : 0); k < kVec; k += 2)
        m2 = __hmax2(m2, *reinterpret_cast<const T2*>(&raw[j].v[k]));
    }
    return fmaxf(to_f32(m2.x), to_f32(m2.y));
  } else {
    float m = NEG_INF;
#pragma unroll
    for (int j = 0; j < kLoads; ++j) {
#pragma unroll
      for (int k = 0; k < kVec; ++k) m = fmaxf(m, to_f32(raw[j].v[k]));
    }
    return m;
  }
}

// Online softmax state: s = sum of exp(x - m) over the elements seen.
__device__ __forceinline__ void merge(float& m, float& s, float m2, float s2) {
  const float mm = fmaxf(m, m2);
  if (mm == NEG_INF) return;  // both empty (or all -Inf): keep s = 0
  s = s * expf(m - mm) + s2 * expf(m2 - mm);
  m = mm;
}

__device__ __forceinline__ void add(float& m, float& s, float v) {
  if (v == NEG_INF) return;  // contributes 0; exp(-Inf - m) would give NaN while m is -Inf
  if (v > m) {
    s = s * expf(m - v) + expf(v - v);  // NaN for v = +Inf (Inf - Inf), as in the reference
    m = v;
  } else {
    s += expf(v - m);  // also NaN when v is NaN (comparisons with NaN are false)
  }
}

#if BPS > 0
#define KILN_BOUNDS __launch_bounds__(BLOCK, BPS)
#else
#define KILN_BOUNDS __launch_bounds__(BLOCK)
#endif

extern "C" __global__ void KILN_BOUNDS softmax(const T* __restrict__ x, T* __restrict__ y,
                                               long long M, long long N) {
  __shared__ float red_a[kTpr > 32 ? BLOCK / 32 : 1];
  __shared__ float red_b[kTpr > 32 ? BLOCK / 32 : 1];
  const int t = threadIdx.x % kTpr;
  const long long row = static_cast<long long>(blockIdx.x) * ROWS + threadIdx.x / kTpr;
  const bool live = row < M;  // threads of rows past M still join every barrier
  const T* xr = x + (live ? row : 0) * N;
  T* yr = y + (live ? row : 0) * N;
  // Uniform over the block: N % kVec == 0 and aligned bases make every row aligned.
  const bool vector_ok = (N % kVec == 0) &&
                         (reinterpret_cast<unsigned long long>(x) % 16 == 0) &&
                         (reinterpret_cast<unsigned long long>(y) % 16 == 0);

  if (vector_ok && N <= static_cast<long long>(kTpr) * ELEMS) {
    const unsigned long long policy = evict_first_policy();
    const int nvec = static_cast<int>(N / kVec);
    const Pack* xv = reinterpret_cast<const Pack*>(xr);
    Pack raw[kLoads];
#pragma unroll
    for (int j = 0; j < kLoads; ++j) {
      const int i = t + j * kTpr;
      if (live && i < nvec) {
        raw[j] = load_x(xv + i, policy);
      } else {
#pragma unroll
        for (int k = 0; k < kVec; ++k) raw[j].v[k] = from_f32<T>(NEG_INF);
      }
    }
    // m = -Inf (row of -Inf) or +Inf gives NaN everywhere through Inf - Inf, as the reference.
    const float m = group_max(thread_max(raw), red_a);
    float e[ELEMS];
    float s = 0.f;
#pragma unroll
    for (int j = 0; j < kLoads; ++j) {
      const bool ok = live && t + j * kTpr < nvec;
#pragma unroll
      for (int k = 0; k < kVec; ++k) {
        const float p = exp2f((to_f32(raw[j].v[k]) - m) * LOG2E);
        e[j * kVec + k] = p;
        if (ok) s += p;
      }
    }
    s = group_sum(s, red_b);
    const float inv = 1.f / s;
    Pack* yv = reinterpret_cast<Pack*>(yr);
#pragma unroll
    for (int j = 0; j < kLoads; ++j) {
      const int i = t + j * kTpr;
      if (live && i < nvec) {
        Pack o;
#pragma unroll
        for (int k = 0; k < kVec; ++k) o.v[k] = from_f32<T>(e[j * kVec + k] * inv);
        store_y(yv + i, o, policy);
      }
    }
    return;
  }

  // Looped path: rows longer than the register capacity, ragged or misaligned rows.
  float m = NEG_INF, s = 0.f;
  if (live) {
    if (vector_ok) {
      const Pack* xv = reinterpret_cast<const Pack*>(xr);
      for (long long i = t; i < N / kVec; i += kTpr) {
        const Pack a = xv[i];
#pragma unroll
        for (int k = 0; k < kVec; ++k) add(m, s, to_f32(a.v[k]));
      }
    } else {
      for (long long c = t; c < N; c += kTpr) add(m, s, to_f32(xr[c]));
    }
  }
  // (m, s) pairs: shuffle merge inside groups, then one shared-memory step.
#pragma unroll
  for (int o = kGroup / 2; o > 0; o >>= 1) {
    const float m2 = __shfl_xor_sync(0xffffffffu, m, o);
    const float s2 = __shfl_xor_sync(0xffffffffu, s, o);
    merge(m, s, m2, s2);
  }
  if constexpr (kTpr > 32) {
    const int warp = threadIdx.x >> 5;
    if ((threadIdx.x & 31) == 0) { red_a[warp] = m; red_b[warp] = s; }
    __syncthreads();
    const int first = (warp / kWarpsPerRow) * kWarpsPerRow;
    m = NEG_INF;
    s = 0.f;
    for (int k = 0; k < kWarpsPerRow; ++k) merge(m, s, red_a[first + k], red_b[first + k]);
  }
  if (!live) return;
  const float inv = 1.f / s;
  if (vector_ok) {
    const Pack* xv = reinterpret_cast<const Pack*>(xr);
    Pack* yv = reinterpret_cast<Pack*>(yr);
    for (long long i = t; i < N / kVec; i += kTpr) {
      const Pack a = xv[i];
      Pack o;
#pragma unroll
      for (int k = 0; k < kVec; ++k) o.v[k] = from_f32<T>(expf(to_f32(a.v[k]) - m) * inv);
      yv[i] = o;
    }
  } else {
    for (long long c = t; c < N; c += kTpr) yr[c] = from_f32<T>(expf(to_f32(xr[c]) - m) * inv);
  }
}
