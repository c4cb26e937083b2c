// rotary_embedding template (GPT-NeoX rotate-half). A block covers BLOCK / TX positions l and HT
// consecutive (b, h) rows: TX threads span the R columns of a half-row in VB-byte vectors, so a
// thread loads its cos/sin vectors once per position and reuses them for all HT rows. Rows are
// taken UNR at a time: the first- and second-half vectors of UNR rows are loaded (streaming, no
// L1 allocation) before any is rotated, which keeps 2 * UNR vector loads in flight per thread.
// fp32 arithmetic: y[i] = x[i] c - x[i+R] s, y[i+R] = x[i+R] c + x[i] s. When R (or D) is not a
// multiple of the vector or a pointer is not VB-aligned, the same code runs with scalar accesses.
// Grid: cdiv(L, BLOCK / TX) * cdiv(B * H, HT) blocks, position tiles fastest.
// HINT 1: the x loads also carry an L2 evict-first cache policy (createpolicy + L2::cache_hint), so
// x's once-read lines are the first victims in L2 instead of dirty lines (y, or the timing's
// flush). MINB > 0: __launch_bounds__(BLOCK, MINB) caps registers for MINB resident blocks per SM.
#ifndef VB
#define VB 16  // bytes per vector access: 4, 8 or 16 (>= sizeof(T))
#endif
#ifndef TX
#define TX 8  // threads across a half-row
#endif
#ifndef BLOCK
#define BLOCK 256
#endif
#ifndef HT
#define HT 4  // (b, h) rows per block that share each cos/sin load
#endif
#ifndef UNR
#define UNR 4  // rows whose loads are issued together (at most HT)
#endif

#ifndef HINT
#define HINT 0
#endif
#ifndef MINB
#define MINB 0
#endif

constexpr int kVec = VB / static_cast<int>(sizeof(T));
constexpr int kLT = BLOCK / TX;       // positions per block
constexpr int kU = HT < UNR ? HT : UNR;  // rows whose loads are issued together
static_assert(kVec >= 1 && (VB == 4 || VB == 8 || VB == 16), "VB: 4, 8 or 16, at least sizeof(T)");
static_assert(BLOCK % TX == 0 && HT % kU == 0, "BLOCK a multiple of TX, HT a multiple of kU");

template <int V>
struct Pack {
  unsigned int u[(V * static_cast<int>(sizeof(T)) + 3) / 4];
};

// Loads V elements at p (V * sizeof(T) bytes, aligned to that): streaming (x) or L1-cached (cos/sin).
template <int V, bool kStream>
__device__ __forceinline__ void load(Pack<V>& r, const T* p, unsigned long long policy = 0) {
  constexpr int bytes = V * static_cast<int>(sizeof(T));
  if constexpr (bytes == 16) {
    if constexpr (kStream && HINT == 1) {
      asm volatile("ld.global.nc.L1::no_allocate.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;"
                   : "=r"(r.u[0]), "=r"(r.u[1]), "=r"(r.u[2]), "=r"(r.u[3]) : "l"(p), "l"(policy));
    } else if constexpr (kStream) {
      asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
                   : "=r"(r.u[0]), "=r"(r.u[1]), "=r"(r.u[2]), "=r"(r.u[3]) : "l"(p));
    } else {
      asm volatile("ld.global.nc.v4.u32 {%0, %1, %2, %3}, [%4];"
                   : "=r"(r.u[0]), "=r"(r.u[1]), "=r"(r.u[2]), "=r"(r.u[3]) : "l"(p));
    }
  } else if constexpr (bytes == 8) {
    if constexpr (kStream) {
      asm volatile("ld.global.nc.L1::no_allocate.v2.u32 {%0, %1}, [%2];"
                   : "=r"(r.u[0]), "=r"(r.u[1]) : "l"(p));
    } else {
      asm volatile("ld.global.nc.v2.u32 {%0, %1}, [%2];" : "=r"(r.u[0]), "=r"(r.u[1]) : "l"(p));
    }
  } else if constexpr (bytes == 4) {
    if constexpr (kStream) {
      asm volatile("ld.global.nc.L1::no_allocate.u32 %0, [%1];" : "=r"(r.u[0]) : "l"(p));
    } else {
      asm volatile("ld.global.nc.u32 %0, [%1];" : "=r"(r.u[0]) : "l"(p));
    }
  } else {  // one 16-bit element
    unsigned short h;
    asm volatile("ld.global.nc.u16 %0, [%1];" : "=h"(h) : "l"(p));
    r.u[0] = h;
  }
}

template <int V>
__device__ __forceinline__ void store(T* p, const Pack<V>& r) {
  constexpr int bytes = V * static_cast<int>(sizeof(T));
  if constexpr (bytes == 16) {
    asm volatile("st.global.v4.u32 [%0], {%1, %2, %3, %4};"
                 :: "l"(p), "r"(r.u[0]), "r"(r.u[1]), "r"(r.u[2]), "r"(r.u[3]) : "memory");
  } else if constexpr (bytes == 8) {
    asm volatile("st.global.v2.u32 [%0], {%1, %2};" :: "l"(p), "r"(r.u[0]), "r"(r.u[1]) : "memory");
  } else if constexpr (bytes == 4) {
    asm volatile("st.global.u32 [%0], %1;" :: "l"(p), "r"(r.u[0]) : "memory");
  } else {
    const unsigned short h = static_cast<unsigned short>(r.u[0]);
    asm volatile("st.global.u16 [%0], %1;" :: "l"(p), "h"(h) : "memory");
  }
}

__device__ __forceinline__ float bits_to_f32(unsigned int s, __half*) {
  return __half2float(__ushort_as_half(static_cast<unsigned short>(s)));
}
__device__ __forceinline__ float bits_to_f32(unsigned int s, __nv_bfloat16*) {
  return __uint_as_float(s << 16);
}
__device__ __forceinline__ float bits_to_f32(unsigned int s, float*) { return __uint_as_float(s); }
__device__ __forceinline__ unsigned int to_bits(__half h) { return __half_as_ushort(h); }
__device__ __forceinline__ unsigned int to_bits(__nv_bfloat16 h) { return __bfloat16_as_ushort(h); }
__device__ __forceinline__ unsigned int to_bits(float f) { return __float_as_uint(f); }

template <int V>
__device__ __forceinline__ float elem(const Pack<V>& r, int k) {
  if constexpr (sizeof(T) == 4) {
    return __uint_as_float(r.u[k]);
  } else {
    const unsigned int word = r.u[k >> 1];
    return bits_to_f32((k & 1) ? word >> 16 : word & 0xffffu, static_cast<T*>(nullptr));
  }
}

template <int V>
__device__ __forceinline__ void pack(Pack<V>& r, const float (&f)[V]) {
  if constexpr (sizeof(T) == 4) {
#pragma unroll
    for (int k = 0; k < V; ++k) r.u[k] = to_bits(from_f32<T>(f[k]));
  } else if constexpr (V == 1) {
    r.u[0] = to_bits(from_f32<T>(f[0]));
  } else {
#pragma unroll
    for (int j = 0; j < V / 2; ++j) {
      r.u[j] = to_bits(from_f32<T>(f[2 * j])) | (to_bits(from_f32<T>(f[2 * j + 1])) << 16);
    }
  }
}

// One thread's share of the block: columns cv = tx, tx + TX, ... (V elements each) of position l,
// for rows bh0 .. bh0 + HT - 1 (those below BH).
template <int V>
__device__ __forceinline__ void rotate_tile(const T* __restrict__ x, const T* __restrict__ cs,
                                            const T* __restrict__ sn, T* __restrict__ y,
                                            long long BH, long long L, long long D, long long R,
                                            long long l, long long bh0, int tx) {
  const long long cols = R / V;
  unsigned long long policy = 0;
#if HINT == 1
  asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
#endif
  const T* cr = cs + l * R;
  const T* sr = sn + l * R;
#pragma unroll 1
  for (long long cv = tx; cv < cols; cv += TX) {
    const long long i = cv * V;
    Pack<V> cp, sp;
    load<V, false>(cp, cr + i);
    load<V, false>(sp, sr + i);
#pragma unroll 1
    for (int j0 = 0; j0 < HT; j0 += kU) {
      Pack<V> lo[kU], hi[kU];
#pragma unroll
      for (int u = 0; u < kU; ++u) {
        const long long bh = bh0 + j0 + u;
        if (bh < BH) {
          const T* xr = x + (bh * L + l) * D;
          load<V, true>(lo[u], xr + i, policy);
          load<V, true>(hi[u], xr + R + i, policy);
        }
      }
#pragma unroll
      for (int u = 0; u < kU; ++u) {
        const long long bh = bh0 + j0 + u;
        if (bh < BH) {
          float a[V], b[V];
#pragma unroll
          for (int k = 0; k < V; ++k) {
            const float c = elem(cp, k), s = elem(sp, k);
            const float p = elem(lo[u], k), q = elem(hi[u], k);
            a[k] = fmaf(p, c, -(q * s));
            b[k] = fmaf(q, c, p * s);
          }
          Pack<V> oa, ob;
          pack(oa, a);
          pack(ob, b);
          T* yr = y + (bh * L + l) * D;
          store(yr + i, oa);
          store(yr + R + i, ob);
        }
      }
    }
  }
}

#if MINB > 0
#define KILN_BOUNDS __launch_bounds__(BLOCK, MINB)
#else
#define KILN_BOUNDS __launch_bounds__(BLOCK)
#endif

extern "C" __global__ void KILN_BOUNDS
    rotary_embedding(const T* __restrict__ x, const T* __restrict__ cs, const T* __restrict__ sn,
                     T* __restrict__ y, long long B, long long H, long long L, long long D,
                     long long R) {
  const long long BH = B * H;
  const long long n_lt = (L + kLT - 1) / kLT;
  const long long tile_l = blockIdx.x % n_lt, tile_h = blockIdx.x / n_lt;
  const int tx = threadIdx.x % TX;
  const long long l = tile_l * kLT + threadIdx.x / TX;
  if (l >= L) return;  // no barriers below
  const long long bh0 = tile_h * HT;
  const bool vector_ok =
      R % kVec == 0 && D % kVec == 0 &&
      ((reinterpret_cast<unsigned long long>(x) | reinterpret_cast<unsigned long long>(y) |
                         reinterpret_cast<unsigned long long>(cs) | reinterpret_cast<unsigned long long>(sn)) %
                        VB) == 0;
  if (vector_ok) {
    rotate_tile<kVec>(x, cs, sn, y, BH, L, D, R, l, bh0, tx);
  } else {
    rotate_tile<1>(x, cs, sn, y, BH, L, D, R, l, bh0, tx);
  }
}
