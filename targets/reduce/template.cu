// Row-sum template: y[m] = sum_n x[m, n] in fp32, rounded once to T. A group of TPR threads sums
// one row (TPR < 32: sub-warp, 32: warp per row, > 32: several warps plus one shared-memory
// step); a block of BLOCK threads holds BLOCK / TPR groups and walks row groups with a grid
// stride (one pass with the grid of target.json; the loop bound is uniform over the block so
// barriers stay legal). Aligned rows with N % VEC == 0 (VEC = 16 / sizeof(T)) are read as 16-byte
// vectors in batches of UNROLL loads per thread issued before any is used (UNROLL * 16 bytes in
// flight per thread), one fp32 accumulator per vector lane; the last partial batch is guarded.
// Ragged or misaligned rows take a scalar strided loop. The reduction order is fixed by the
// configuration, so results are bit-for-bit deterministic (no atomics).
// HINT: 0 plain loads; 1 loads with an L2 evict-first policy (createpolicy + L2::cache_hint) and
// no L1 allocation; 3 ld.global.cs (streaming); 4 as 1 plus the L2::256B prefetch-size hint (the
// L2 fetches whole 256-byte blocks from DRAM). BPS > 0: __launch_bounds__(BLOCK, BPS).
// GRID > 0 (non-TMA; target.json launches min(row groups, 132 * GRID) blocks): persistent groups;
// when a row fits one batch (N / VEC <= TPR * UNROLL) each group loads its next row into
// registers before it reduces the current one, so the loads stay in flight across the reduction.
// Fewer bytes in flight per SM measured faster on H100 (TPR 128 > 64 > 32 at equal row coverage),
// hence TPR 256 / 512 with UNROLL 2 / 1 in target.json.
// TMA 1 (sm_90 bulk copies; target.json gives it a grid of a few blocks per SM): each block walks
// its rows (blockIdx.x + k * gridDim.x) as chunks of at most CHUNK bytes; thread 0 keeps STAGES
// chunks in flight with cp.async.bulk global -> shared (completion counted on one mbarrier per
// stage; HINT 1 gives them the L2 evict-first policy), all BLOCK threads sum each chunk from shared
// memory as 16-byte vectors, and one __syncthreads per chunk frees its stage for the next copy.
// When a row's last chunk is summed, a shuffle + shared-memory step (two buffers alternating by
// row) gives the total and thread 0 writes it. Rows whose byte length is not a multiple of 16 or
// a misaligned x fall back to a strided loop by the whole block.
#ifndef BLOCK
#define BLOCK 256
#endif
#ifndef TPR
#define TPR 128
#endif
#ifndef UNROLL
#define UNROLL 4
#endif
#ifndef BPS
#define BPS 0
#endif
#ifndef HINT
#define HINT 0
#endif
#ifndef TMA
#define TMA 0
#endif
#ifndef STAGES
#define STAGES 4
#endif
#ifndef CHUNK
#define CHUNK 8192
#endif
#ifndef GRID
#define GRID 0
#endif

constexpr int kVec = 16 / static_cast<int>(sizeof(T));  // elements per 16-byte vector
constexpr int kRowsPerBlock = BLOCK / TPR;
constexpr int kWarpsPerRow = TPR >= 32 ? TPR / 32 : 1;
constexpr int kGroup = TPR < 32 ? TPR : 32;  // lanes that shuffle together
static_assert(BLOCK % TPR == 0 && (TPR & (TPR - 1)) == 0, "TPR must be a power of two");

struct alignas(16) Pack { T v[kVec]; };

__device__ __forceinline__ unsigned long long evict_first_policy() {
  unsigned long long p = 0;
#if HINT == 1 || HINT == 4
  asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(p));
#endif
  return p;
}

__device__ __forceinline__ Pack load_x(const Pack* p, unsigned long long policy) {
#if HINT == 1
  uint4 u;
  asm("ld.global.nc.L1::no_allocate.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;"
      : "=r"(u.x), "=r"(u.y), "=r"(u.z), "=r"(u.w)
      : "l"(p), "l"(policy));
  return *reinterpret_cast<const Pack*>(&u);
#elif HINT == 4
  uint4 u;
  asm("ld.global.nc.L1::no_allocate.L2::cache_hint.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4], %5;"
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

// UNROLL guarded 16-byte loads, all issued before use; zeros past the row.
__device__ __forceinline__ void load_batch(Pack (&a)[UNROLL], const Pack* __restrict__ xv,
                                           long long i, long long nvec,
                                           unsigned long long policy) {
#pragma unroll
  for (int u = 0; u < UNROLL; ++u) {
    if (i + u * TPR < nvec) {
      a[u] = load_x(xv + i + u * TPR, policy);
    } else {
#pragma unroll
      for (int k = 0; k < kVec; ++k) a[u].v[k] = from_f32<T>(0.f);
    }
  }
}

__device__ __forceinline__ void accumulate(float (&acc)[kVec], const Pack (&a)[UNROLL]) {
#pragma unroll
  for (int u = 0; u < UNROLL; ++u) {
#pragma unroll
    for (int k = 0; k < kVec; ++k) acc[k] += to_f32(a[u].v[k]);
  }
}

// Sum over the TPR threads of a row; the result is valid in the row's thread t == 0. Every
// thread of the block must call it (two barriers when a row spans several warps).
__device__ __forceinline__ float group_sum(float s, float* warp_totals, int local_row) {
#pragma unroll
  for (int o = kGroup / 2; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
  if constexpr (TPR > 32) {
    const int warp = threadIdx.x >> 5;
    if ((threadIdx.x & 31) == 0) warp_totals[warp] = s;
    __syncthreads();
    s = 0.f;
#pragma unroll
    for (int k = 0; k < kWarpsPerRow; ++k) s += warp_totals[local_row * kWarpsPerRow + k];
    __syncthreads();  // warp_totals is rewritten by the next row group
  }
  return s;
}

#if BPS > 0
#define KILN_BOUNDS __launch_bounds__(BLOCK, BPS)
#elif GRID > 0 && !TMA
#define KILN_BOUNDS __launch_bounds__(BLOCK, GRID)  // all GRID blocks per SM resident at once
#else
#define KILN_BOUNDS __launch_bounds__(BLOCK)
#endif

#if TMA
static_assert(CHUNK % 16 == 0 && BLOCK % 32 == 0, "CHUNK a multiple of 16 bytes");

__device__ __forceinline__ unsigned smem_addr(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void wait_parity(unsigned bar, unsigned parity) {
  unsigned done;
  do {
    asm volatile(
        "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        " selp.u32 %0, 1, 0, p;\n}"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
  } while (!done);
}

// Sum over the whole block; the result is valid in thread 0. buf alternates between rows so a
// fast warp's next row cannot overwrite totals thread 0 is still reading.
__device__ __forceinline__ float block_total(float s, float* buf) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
  if ((threadIdx.x & 31) == 0) buf[threadIdx.x >> 5] = s;
  __syncthreads();
  s = 0.f;
  if (threadIdx.x == 0) {
#pragma unroll
    for (int k = 0; k < BLOCK / 32; ++k) s += buf[k];
  }
  return s;
}

extern "C" __global__ void KILN_BOUNDS reduce(const T* __restrict__ x, T* __restrict__ y,
                                              long long M, long long N) {
  __shared__ alignas(128) unsigned char stage[STAGES][CHUNK];
  __shared__ alignas(8) unsigned long long full[STAGES];
  __shared__ float totals[2][BLOCK / 32];
  const long long rows = blockIdx.x < M ? (M - 1 - blockIdx.x) / gridDim.x + 1 : 0;
  const long long row_bytes = N * static_cast<long long>(sizeof(T));
  const bool bulk_ok = (row_bytes % 16 == 0) &&
                       (reinterpret_cast<unsigned long long>(x) % 16 == 0);
  if (!bulk_ok) {  // whole block per row, scalar strided loop
    for (long long k = 0; k < rows; ++k) {
      const long long row = blockIdx.x + k * gridDim.x;
      const T* xr = x + row * N;
      float s = 0.f;
      for (long long c = threadIdx.x; c < N; c += BLOCK) s += to_f32(xr[c]);
      s = block_total(s, totals[k & 1]);
      if (threadIdx.x == 0) y[row] = from_f32<T>(s);
    }
    return;
  }
  const long long chunks_per_row = (row_bytes + CHUNK - 1) / CHUNK;
  const long long units = rows * chunks_per_row;
  unsigned long long policy = 0;
#if HINT == 1
  asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
#endif
  // Issues the bulk copy of unit u (row u / chunks_per_row of this block, chunk u % ...).
  auto issue = [&](long long u) {
    const long long k = u / chunks_per_row, c = u - k * chunks_per_row;
    const long long row = blockIdx.x + k * gridDim.x;
    const long long off = c * CHUNK;
    const unsigned bytes = static_cast<unsigned>(row_bytes - off < CHUNK ? row_bytes - off : CHUNK);
    const char* src = reinterpret_cast<const char*>(x) + row * row_bytes + off;
    const int slot = static_cast<int>(u % STAGES);
    const unsigned bar = smem_addr(&full[slot]);
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes)
                 : "memory");
#if HINT == 1
    asm volatile(
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint"
        " [%0], [%1], %2, [%3], %4;" ::"r"(smem_addr(stage[slot])), "l"(src), "r"(bytes), "r"(bar),
        "l"(policy)
        : "memory");
#else
    asm volatile(
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes"
        " [%0], [%1], %2, [%3];" ::"r"(smem_addr(stage[slot])), "l"(src), "r"(bytes), "r"(bar)
        : "memory");
#endif
  };
  if (threadIdx.x == 0) {
#pragma unroll
    for (int i = 0; i < STAGES; ++i)
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smem_addr(&full[i])) : "memory");
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    for (long long u = 0; u < units && u < STAGES; ++u) issue(u);
  }
  float acc[kVec];
#pragma unroll
  for (int k = 0; k < kVec; ++k) acc[k] = 0.f;
  for (long long u = 0; u < units; ++u) {
    const int slot = static_cast<int>(u % STAGES);
    wait_parity(smem_addr(&full[slot]), static_cast<unsigned>((u / STAGES) & 1));
    const long long k = u / chunks_per_row, c = u - k * chunks_per_row;
    const long long off = c * CHUNK;
    const int nv = static_cast<int>((row_bytes - off < CHUNK ? row_bytes - off : CHUNK) / 16);
    const Pack* sv = reinterpret_cast<const Pack*>(stage[slot]);
    for (int v = threadIdx.x; v < nv; v += BLOCK) {
      const Pack a = sv[v];
#pragma unroll
      for (int e = 0; e < kVec; ++e) acc[e] += to_f32(a.v[e]);
    }
    const bool row_end = c == chunks_per_row - 1;
    if (row_end) {
      float s = 0.f;
#pragma unroll
      for (int e = 0; e < kVec; ++e) { s += acc[e]; acc[e] = 0.f; }
      s = block_total(s, totals[k & 1]);  // its __syncthreads also frees the stage
      if (threadIdx.x == 0) y[blockIdx.x + k * gridDim.x] = from_f32<T>(s);
    } else {
      __syncthreads();  // every thread is done with this stage
    }
    if (threadIdx.x == 0 && u + STAGES < units) {
      asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
      issue(u + STAGES);
    }
  }
}

#else  // !TMA

extern "C" __global__ void KILN_BOUNDS reduce(const T* __restrict__ x, T* __restrict__ y,
                                              long long M, long long N) {
  __shared__ float warp_totals[TPR > 32 ? BLOCK / 32 : 1];
  const int t = threadIdx.x % TPR;
  const int local_row = threadIdx.x / TPR;
  const long long step = static_cast<long long>(gridDim.x) * kRowsPerBlock;
  const long long first = static_cast<long long>(blockIdx.x) * kRowsPerBlock + local_row;
  const bool vector_ok = (N % kVec == 0) && (reinterpret_cast<unsigned long long>(x) % 16 == 0);
  const long long nvec = N / kVec;
  const unsigned long long policy = evict_first_policy();

#if GRID > 0
  if (vector_ok && nvec <= static_cast<long long>(TPR) * UNROLL) {
    // Persistent groups, one batch per row: the next row's loads are issued before this row is
    // reduced. Out-of-range groups (row >= M) still join every group_sum barrier.
    Pack cur[UNROLL];
    long long row = first;
    if (row < M) load_batch(cur, reinterpret_cast<const Pack*>(x + row * N), t, nvec, policy);
    for (; row - local_row < M; row += step) {
      const long long next = row + step;
      Pack nxt[UNROLL];
      if (next < M) load_batch(nxt, reinterpret_cast<const Pack*>(x + next * N), t, nvec, policy);
      float s = 0.f;
      if (row < M) {
        float acc[kVec];
#pragma unroll
        for (int k = 0; k < kVec; ++k) acc[k] = 0.f;
        accumulate(acc, cur);
#pragma unroll
        for (int k = 0; k < kVec; ++k) s += acc[k];
      }
      s = group_sum(s, warp_totals, local_row);
      if (t == 0 && row < M) y[row] = from_f32<T>(s);
      if (next < M) {
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) cur[u] = nxt[u];
      }
    }
    return;
  }
#endif

  for (long long row = first; row - local_row < M; row += step) {
    float s = 0.f;
    if (row < M) {
      const T* xr = x + row * N;
      if (vector_ok) {
        const Pack* xv = reinterpret_cast<const Pack*>(xr);
        float acc[kVec];
#pragma unroll
        for (int k = 0; k < kVec; ++k) acc[k] = 0.f;
        long long i = t;
        // Full batches: UNROLL independent 16-byte loads in flight before the first add.
        for (; i + static_cast<long long>(UNROLL - 1) * TPR < nvec; i += UNROLL * TPR) {
          Pack a[UNROLL];
#pragma unroll
          for (int u = 0; u < UNROLL; ++u) a[u] = load_x(xv + i + u * TPR, policy);
          accumulate(acc, a);
        }
        if (i < nvec) {  // last partial batch, guarded
          Pack a[UNROLL];
          load_batch(a, xv, i, nvec, policy);
          accumulate(acc, a);
        }
#pragma unroll
        for (int k = 0; k < kVec; ++k) s += acc[k];
      } else {
        for (long long c = t; c < N; c += TPR) s += to_f32(xr[c]);
      }
    }
    s = group_sum(s, warp_totals, local_row);
    if (t == 0 && row < M) y[row] = from_f32<T>(s);
  }
}

#endif  // TMA
