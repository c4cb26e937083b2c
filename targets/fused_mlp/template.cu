// fused_mlp template: y = (silu(x @ w1) * (x @ w3)) @ w2 in ONE persistent launch.
// Design:
// - GRID persistent blocks take tiles from a queue (sync[0], atomicAdd). Tickets [0, T1)
//   are phase-1 tiles: BM x BN/2 of h, gate and up computed together from one x tile (the B tile
//   holds BN/2 columns of w1 then the same BN/2 columns of w3); the epilogue writes h = silu(g) * u
//   as T and counts the tile for its row block (sync[2 + m]). Tickets [T1, T) are phase-2 tiles:
//   BM x BN of y = h @ w2, each waiting until its row block of h is complete. Row blocks are taken
//   in NG groups, so the first group's phase-2 tiles are ready when phase 1's tickets run out and
//   keep the GPU busy while the last phase-1 tiles finish. A tile only waits on smaller tickets,
//   handed out to running blocks that never wait in phase 1: no deadlock, whatever the number of
//   co-resident blocks. The last block out (sync[1]) zeroes the counters: the buffer is left as
//   kiln hands it over, so back-to-back timed launches work. sync holds M ints: with M < 2 + row
//   blocks one counter serves all rows, with M < 3 block 0 does every tile alone.
// - Mainloop: k-tiles of 64 streamed by cp.async (16 B, zero-filled outside the matrices) into a
//   STAGES-deep ring in dynamic shared memory. Rows of the A tile are 128 B with the 128-byte XOR
//   swizzle; the B tile is stored as 64-column atoms of 64 rows x 128 B, same swizzle. This is the
//   layout wgmma reads through descriptors (A K-major, B MN-major) and is conflict-free for
//   ldmatrix, so both compute paths share it:
//   ARCH 0: 8 warps (2 x 4) of mma.sync.m16n8k16 (f32 accumulate), ldmatrix / ldmatrix.trans;
//           all threads load, one __syncthreads per k-tile (STAGES - 1 k-tiles prefetched).
//   ARCH 1: WG warpgroups of wgmma.m64n(BN/2)k16 (f32 accumulate), each on 64 rows, one wgmma
//           group kept in flight; all threads load (STAGES - 2 k-tiles prefetched).
//   ARCH 2: warp-specialized: a producer warpgroup streams k-tiles (across tile boundaries)
//           through full/empty mbarriers to two wgmma consumer warpgroups (see the kernel).
//   BM = 64 * WG rows per tile; BN/2 columns of h (phase 1) or BN of y (phase 2).
// - WIDE (ARCH 1, 2; 0 = the original code): 1 = each k16 step is ONE wgmma m64n(BN)k16 over
//   the whole B tile (gate | up, or BN columns of y) instead of two m64n(BN/2) sharing A: A is
//   read from shared memory once (2 KB less per step and warpgroup: with the cp.async writes the
//   SM's shared-memory traffic per k-tile drops from ~141 to ~125 B/clk at tensor peak), the
//   epilogue has a fast path (tile inside the matrices: one base pointer, immediate offsets, no
//   per-element guards) and ARCH 2's producer claims its tickets one tile ahead. 2 (ARCH 1) =
//   WIDE 1 + right after a tile's mainloop the next tile (claimed ahead) has its first k-tiles
//   issued, if it can start (phase 1, or its row block of h is already complete: one poll), so
//   the pipeline refills during the epilogue instead of after it.
// - TMA 1 (ARCH 2, WIDE 1, BN 256): one producer thread fills each slot with TMA boxes through
//   the tensor maps kiln encodes (target.json "tensor_maps": x or h as one BM x 64 box, the
//   weights as 64 x 64 boxes, 128-byte swizzle: the layout above; out-of-range elements arrive as
//   zeros), completing the slot's bytes on its `full` mbarrier, and each consumer warpgroup's rows
//   of a y tile leave through two 8 KB shared-memory buffers and TMA stores, so the warpgroup goes
//   on to its next tile while the engine writes y. A phase-2 tile reads h, written with ordinary
//   stores by other blocks, through the async proxy: writer and reader both fence the proxies
//   (fence.proxy.async.global) around the counter's release and acquire. Where rows are not
//   16-byte aligned kiln passes zero maps and the cp.async producer runs instead.
// - HTMA 1 (TMA 1): a phase-1 tile's h leaves like y, through the warpgroup's two shared-memory
//   buffers and TMA stores (map h_out, 64 x 64 boxes), instead of ordinary stores followed by a
//   fence that waits for all of them. Each consumer warpgroup counts its own half of the tile
//   (row blocks are complete at 2 x nt1 counts), and it counts late: during the next tile's
//   second k-step, once its stores have completed, so the tensor cores do not wait for them. A
//   warpgroup that would block on the next tile's first slot counts first (that tile may be a
//   phase-2 tile waiting for this very row block).
// - Rows whose pitch is not a multiple of 8 elements, or misaligned pointers: the same pipeline
//   with element-wise guarded loads into the same layout (slow, correct). Stores are guarded.
#ifndef ARCH
#define ARCH 1
#endif
#ifndef BN
#define BN 256
#endif
#ifndef STAGES
#define STAGES 4
#endif
#ifndef GRID
#define GRID 132
#endif
#ifndef WG
#define WG 2
#endif
#ifndef NG
#define NG 2
#endif
#ifndef WIDE
#define WIDE 0  // 1: one wgmma m64n(BN)k16 per k16 step (gate and up together); ARCH 2 claims ahead
#endif
#ifndef TMA
#define TMA 0  // 1 (ARCH 2, WIDE 1, BN 256): TMA loads by one producer thread, TMA stores of y
#endif
#ifndef HTMA
#define HTMA 0  // 1 (TMA 1): h leaves through TMA stores too, counted late (see above)
#endif

#define BM (64 * WG)          // one warpgroup (ARCH 1) or two warps (ARCH 0) per 64 rows
#define BK 64
#define NTHREADS (128 * WG)

constexpr int kABytes = BM * BK * 2;     // A tile: BM rows of 64 elements (128 B)
constexpr int kAtomBytes = BK * 128;     // one 64-column atom of the B tile
constexpr int kStageBytes = kABytes + BK * BN * 2;
constexpr int kPref = ARCH == 1 ? STAGES - 2 : STAGES - 1;  // k-tiles in flight ahead
static_assert(kPref >= 1, "ARCH 1 needs STAGES >= 3");
static_assert(BN == 128 || BN == 256, "BN is 128 or 256");
static_assert(ARCH == 1 || WG == 2, "ARCH 0 uses 8 warps, ARCH 2 two consumer warpgroups");
static_assert(!TMA || (ARCH == 2 && WIDE == 1 && BN == 256), "TMA is for ARCH 2, WIDE 1, BN 256");
static_assert(!HTMA || TMA, "HTMA is for TMA 1");

template <typename A, typename B> struct SameType { static constexpr bool value = false; };
template <typename A> struct SameType<A, A> { static constexpr bool value = true; };
constexpr bool kIsBf16 = SameType<T, __nv_bfloat16>::value;

// ---------------------------------------------------------------- PTX helpers
__device__ __forceinline__ unsigned smem_u32(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void cp_async16(unsigned dst, const void* src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
               "r"(src_bytes)
               : "memory");
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
template <int N> __device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// Byte offset of 16-byte chunk c of row r in the A tile (128-byte swizzle).
__device__ __forceinline__ unsigned a_off(int r, int c) {
  return r * 128 + ((c ^ (r & 7)) << 4);
}
// Byte offset of column chunk cc (8 columns) of k-row k in the B tile.
__device__ __forceinline__ unsigned b_off(int k, int cc) {
  return (cc >> 3) * kAtomBytes + k * 128 + (((cc & 7) ^ (k & 7)) << 4);
}

__device__ __forceinline__ float silu_mul(float g, float u) {
  // g / (1 + exp(-g)): +inf -> +inf, -inf -> NaN, NaN -> NaN, as the fp64 reference.
  return __fdividef(g, 1.f + __expf(-g)) * u;
}

struct alignas(4) Pair { T a, b; };
__device__ __forceinline__ Pair pack2(float v0, float v1) {
  Pair pr;
  pr.a = from_f32<T>(v0);
  pr.b = from_f32<T>(v1);
  return pr;
}

// Stores (v0, v1) at out[r, c], out[r, c + 1] within rows x cols.
__device__ __forceinline__ void store2(T* out, long long ld, long long rows, long long cols,
                                       long long r, long long c, float v0, float v1, bool vec) {
  if (r >= rows) return;
  T* p = out + r * ld + c;
  if (vec && c + 1 < cols) {
    Pair pr;
    pr.a = from_f32<T>(v0);
    pr.b = from_f32<T>(v1);
    *reinterpret_cast<Pair*>(p) = pr;
  } else {
    if (c < cols) p[0] = from_f32<T>(v0);
    if (c + 1 < cols) p[1] = from_f32<T>(v1);
  }
}

// ---------------------------------------------------------------- tile loading
// One GEMM tile's sources: A = rows [m0, m0 + BM) of a rows x k matrix (pitch lda); B = k x n
// (pitch ldb). Dual (b1 != nullptr): tile columns [0, BN/2) are b0's [n0, n0 + BN/2), the rest
// b1's same columns. Single: tile columns are b0's [n0, n0 + BN).
struct TileSrc {
  const T* a;
  const T* b0;
  const T* b1;
  long long lda, ldb, rows, n, k, m0, n0;
};

// 16-byte cp.async path (pitches multiple of 8 elements, 16-byte aligned bases), for NT loading
// threads. Each thread copies one 16-byte column chunk of A in rows r0 + (NT / 8) j and one of B in
// k-rows kr0 + (NT / kCpr) j; the per-tile part of the addressing is done once by vec_setup.
constexpr int kCpr = BN / 8;  // B chunks per k-row
template <int NT> struct VecLoader {
  static constexpr int kARowStep = NT / 8, kAPasses = BM / kARowStep;
  static constexpr int kBRowStep = NT / kCpr, kBPasses = (BK + kBRowStep - 1) / kBRowStep;
  const char* pa;        // A chunk of row r0 at k = 0
  const char* pb;        // B chunk of k-row kr0
  long long a_rowstep;   // bytes between rows r0 + kARowStep j
  long long b_rowstep;   // bytes between k-rows kr0 + kBRowStep j
  long long b_ktile;     // bytes between k-tiles in B (BK rows)
  int k_left;            // K - (k of this thread's A chunk)
  int kb_left;           // K - kr0
  unsigned a_rows_ok;    // bit j: row r0 + kARowStep j is inside A
  bool b_col_ok;

  __device__ __forceinline__ void setup(const TileSrc& t, int tid) {
    const int c = tid & 7, r0 = tid >> 3;
    pa = reinterpret_cast<const char*>(t.a + (t.m0 + r0) * t.lda + c * 8);
    a_rowstep = kARowStep * t.lda * 2;
    k_left = static_cast<int>(t.k) - c * 8;
    a_rows_ok = 0;
#pragma unroll
    for (int j = 0; j < kAPasses; ++j) {
      a_rows_ok |= (t.m0 + r0 + kARowStep * j < t.rows ? 1u : 0u) << j;
    }
    const int cc = tid % kCpr, kr0 = tid / kCpr;
    const bool dual = t.b1 != nullptr;
    const T* base = dual && cc >= kCpr / 2 ? t.b1 : t.b0;
    const long long col = t.n0 + (dual ? cc % (kCpr / 2) : cc) * 8;
    b_col_ok = col < t.n;
    pb = reinterpret_cast<const char*>(base + kr0 * t.ldb + (b_col_ok ? col : 0));
    b_rowstep = kBRowStep * t.ldb * 2;
    b_ktile = BK * t.ldb * 2;
    kb_left = static_cast<int>(t.k) - kr0;
  }

  __device__ __forceinline__ void load(const T* zero_src, unsigned stage, int kt, int tid) const {
    const int k0 = kt * BK;
    {
      const int c = tid & 7, r0 = tid >> 3;
      const bool k_ok = k0 < k_left;
      const char* p = pa + k0 * 2;
#pragma unroll
      for (int j = 0; j < kAPasses; ++j) {
        const bool ok = k_ok && ((a_rows_ok >> j) & 1u);
        cp_async16(stage + a_off(r0 + kARowStep * j, c),
                   ok ? p + j * a_rowstep : reinterpret_cast<const char*>(zero_src), ok ? 16 : 0);
      }
    }
    {
      const int cc = tid % kCpr, kr0 = tid / kCpr;
      const char* p = pb + kt * b_ktile;
#pragma unroll
      for (int j = 0; j < kBPasses; ++j) {
        if (kBPasses * kBRowStep != BK && kr0 + kBRowStep * j >= BK) break;  // ragged last pass
        const bool ok = b_col_ok && k0 + kBRowStep * j < kb_left;
        cp_async16(stage + kABytes + b_off(kr0 + kBRowStep * j, cc),
                   ok ? p + j * b_rowstep : reinterpret_cast<const char*>(zero_src), ok ? 16 : 0);
      }
    }
  }
};

// Element-wise path for any pitch or alignment (L2 loads: h is written by other blocks).
template <int NT>
__device__ __forceinline__ void load_scalar(const TileSrc& t, unsigned char* stage, int kt, int tid) {
  const long long k0 = static_cast<long long>(kt) * BK;
  const unsigned short* a = reinterpret_cast<const unsigned short*>(t.a);
  for (int e = tid; e < BM * BK; e += NT) {
    const int r = e / BK, kc = e % BK;
    const long long gr = t.m0 + r, gk = k0 + kc;
    unsigned short v = 0;
    if (gr < t.rows && gk < t.k) v = __ldcg(a + gr * t.lda + gk);
    *reinterpret_cast<unsigned short*>(stage + a_off(r, kc >> 3) + (kc & 7) * 2) = v;
  }
  const bool dual = t.b1 != nullptr;
  for (int e = tid; e < BK * BN; e += NT) {
    const int kr = e / BN, cl = e % BN;
    const T* base = dual && cl >= BN / 2 ? t.b1 : t.b0;
    const long long col = t.n0 + (dual ? cl % (BN / 2) : cl), gk = k0 + kr;
    unsigned short v = 0;
    if (col < t.n && gk < t.k) {
      v = __ldcg(reinterpret_cast<const unsigned short*>(base) + gk * t.ldb + col);
    }
    *reinterpret_cast<unsigned short*>(stage + kABytes + b_off(kr, cl >> 3) + (cl & 7) * 2) = v;
  }
}

// Loads k-tile kt of tile t into ring slot kt % STAGES (cooperative kernels: all threads load).
__device__ __forceinline__ void load_tile(const TileSrc& t, const VecLoader<NTHREADS>& v,
                                          unsigned char* smem, int kt, int tid, bool vec) {
  unsigned char* stage = smem + (kt % STAGES) * kStageBytes;
  if (vec) {
    v.load(t.b0, smem_u32(stage), kt, tid);
  } else {
    load_scalar<NTHREADS>(t, stage, kt, tid);
  }
}

// ---------------------------------------------------------------- ARCH 1, 2: wgmma (sm_90a)
#if ARCH >= 1
__device__ __forceinline__ void wgmma_fence() {
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
template <int N> __device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
__device__ __forceinline__ void fence_proxy_async() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

__device__ __forceinline__ void wgmma_m64n64_f16(float (&d)[32], unsigned long long da,
                                                unsigned long long db) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19,"
      "%20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
      "}, %32, %33, p, 1, 1, 0, 1;\n}\n"
      :
        "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
        "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),
        "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]),
        "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]),
        "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "l"(da), "l"(db), "r"(1));
}

__device__ __forceinline__ void wgmma_m64n64_bf16(float (&d)[32], unsigned long long da,
                                                unsigned long long db) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19,"
      "%20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
      "}, %32, %33, p, 1, 1, 0, 1;\n}\n"
      :
        "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
        "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),
        "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]),
        "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]),
        "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "l"(da), "l"(db), "r"(1));
}

__device__ __forceinline__ void wgmma_m64n128_f16(float (&d)[64], unsigned long long da,
                                                unsigned long long db) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19,"
      "%20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37,"
      "%38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55,"
      "%56, %57, %58, %59, %60, %61, %62, %63"
      "}, %64, %65, p, 1, 1, 0, 1;\n}\n"
      :
        "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
        "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),
        "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]),
        "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]),
        "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]),
        "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]),
        "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]),
        "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]),
        "+f"(d[63])
      : "l"(da), "l"(db), "r"(1));
}

__device__ __forceinline__ void wgmma_m64n128_bf16(float (&d)[64], unsigned long long da,
                                                unsigned long long db) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19,"
      "%20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37,"
      "%38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55,"
      "%56, %57, %58, %59, %60, %61, %62, %63"
      "}, %64, %65, p, 1, 1, 0, 1;\n}\n"
      :
        "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
        "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),
        "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]),
        "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]),
        "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]),
        "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]),
        "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]),
        "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]),
        "+f"(d[63])
      : "l"(da), "l"(db), "r"(1));
}

constexpr int kAcc = BN / 4;  // f32 accumulators per thread for one m64 x BN/2 half

__device__ __forceinline__ void wgmma_half(float (&d)[kAcc], unsigned long long da,
                                           unsigned long long db) {
#if BN == 256
  if constexpr (kIsBf16) wgmma_m64n128_bf16(d, da, db); else wgmma_m64n128_f16(d, da, db);
#else
  if constexpr (kIsBf16) wgmma_m64n64_bf16(d, da, db); else wgmma_m64n64_f16(d, da, db);
#endif
}

// Keeps the compiler from moving accumulator accesses across the asynchronous wgmma.
__device__ __forceinline__ void fence_operand(float (&d)[kAcc]) {
#pragma unroll
  for (int i = 0; i < kAcc; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// Shared-memory matrix descriptors, 128-byte swizzle (layout type 1 in bits 62-63).
// A (K-major): rows of 128 B, 8-row groups 1024 B apart (SBO); LBO unused (1).
__device__ __forceinline__ unsigned long long desc_a(unsigned addr) {
  return static_cast<unsigned long long>((addr & 0x3FFFF) >> 4) | (1ull << 16) | (64ull << 32) |
         (1ull << 62);
}
// B (MN-major): 64-column atoms kAtomBytes apart (LBO), 8-row k groups 1024 B apart (SBO).
__device__ __forceinline__ unsigned long long desc_b(unsigned addr) {
  return static_cast<unsigned long long>((addr & 0x3FFFF) >> 4) |
         (static_cast<unsigned long long>(kAtomBytes >> 4) << 16) | (64ull << 32) | (1ull << 62);
}

// WIDE: one wgmma m64n(BN)k16 over the whole B tile (all BN / 64 atoms, LBO apart): the
// accumulators of n8 blocks [0, BN/16) are h0's, the rest h1's, in the same order as two
// m64n(BN/2) instructions leave them; each A slice is read from shared memory once, not twice.
#define KW_ACC8(d, o) "+f"(d[o]), "+f"(d[o + 1]), "+f"(d[o + 2]), "+f"(d[o + 3]), \
  "+f"(d[o + 4]), "+f"(d[o + 5]), "+f"(d[o + 6]), "+f"(d[o + 7])
#define KW_ACC32(d, o) KW_ACC8(d, o), KW_ACC8(d, o + 8), KW_ACC8(d, o + 16), KW_ACC8(d, o + 24)
#define KW_ACC64(d, o) KW_ACC32(d, o), KW_ACC32(d, o + 32)
#define KW_LIST64                                                                                \
  "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, "  \
  "%20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, "  \
  "%38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, "  \
  "%56, %57, %58, %59, %60, %61, %62, %63"
#if BN == 256
#define KW_MMA(TY)                                                                             \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"                                   \
               "wgmma.mma_async.sync.aligned.m64n256k16.f32." TY "." TY " {" KW_LIST64 ", "   \
               "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, "  \
               "%79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, "  \
               "%94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, " \
               "%108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, " \
               "%121, %122, %123, %124, %125, %126, %127}, "                                   \
               "%128, %129, p, 1, 1, 0, 1;\n}\n"                                               \
               : KW_ACC64(d0, 0), KW_ACC64(d1, 0)                                             \
               : "l"(da), "l"(db), "r"(1))
#else
#define KW_MMA(TY)                                                                             \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"                                    \
               "wgmma.mma_async.sync.aligned.m64n128k16.f32." TY "." TY " {" KW_LIST64 "}, "  \
               "%64, %65, p, 1, 1, 0, 1;\n}\n"                                                 \
               : KW_ACC32(d0, 0), KW_ACC32(d1, 0)                                             \
               : "l"(da), "l"(db), "r"(1))
#endif
__device__ __forceinline__ void wgmma_full(float (&d0)[kAcc], float (&d1)[kAcc],
                                           unsigned long long da, unsigned long long db) {
  if constexpr (kIsBf16) KW_MMA("bf16"); else KW_MMA("f16");
}

// One k16 step: A (64 rows, descriptor da) x B tile k-rows 16 kk.. (at shared address b_addr).
__device__ __forceinline__ void wgmma_step(float (&h0)[kAcc], float (&h1)[kAcc],
                                           unsigned long long da, unsigned b_addr) {
#if WIDE
  wgmma_full(h0, h1, da, desc_b(b_addr));
#else
  wgmma_half(h0, da, desc_b(b_addr));
  wgmma_half(h1, da, desc_b(b_addr + (BN / 128) * kAtomBytes));
#endif
}

// h0: tile columns [0, BN/2), h1: [BN/2, BN); (consumer) warpgroup wg owns rows [64 wg, 64 wg + 64).
struct Acc {
  float h0[kAcc], h1[kAcc];
};

#if ARCH == 1
// Issues the tile's first kPref k-tiles (kPref cp.async groups) into ring slots [0, kPref).
__device__ __forceinline__ void prologue(const TileSrc& t, unsigned char* smem, int tid, bool vec) {
  const int kt_count = static_cast<int>((t.k + BK - 1) / BK);
  VecLoader<NTHREADS> v;
  v.setup(t, tid);
  for (int s = 0; s < kPref; ++s) {
    if (s < kt_count) load_tile(t, v, smem, s, tid, vec);
    cp_async_commit();
  }
}

// pre: prologue(t) was issued already (WIDE 2, during the previous tile's epilogue).
__device__ __forceinline__ void mainloop(const TileSrc& t, unsigned char* smem, int tid, bool vec,
                                         Acc& acc, bool pre = false) {
#pragma unroll
  for (int i = 0; i < kAcc; ++i) acc.h0[i] = acc.h1[i] = 0.f;
  const int kt_count = static_cast<int>((t.k + BK - 1) / BK);
  VecLoader<NTHREADS> v;
  v.setup(t, tid);
  if (!pre) {
    for (int s = 0; s < kPref; ++s) {
      if (s < kt_count) load_tile(t, v, smem, s, tid, vec);
      cp_async_commit();
    }
  }
  const unsigned base = smem_u32(smem);
  const int wg = tid >> 7;
  for (int kt = 0; kt < kt_count; ++kt) {
    cp_async_wait<kPref - 1>();  // k-tile kt has landed (this thread's part)
    fence_proxy_async();         // ... and is visible to the tensor cores' (async) proxy
    __syncthreads();             // everyone's part; wgmma of k-tile kt - 2 retired everywhere
    if (kt + kPref < kt_count) load_tile(t, v, smem, kt + kPref, tid, vec);
    cp_async_commit();
    const unsigned st = base + (kt % STAGES) * kStageBytes;
    fence_operand(acc.h0);
    fence_operand(acc.h1);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < BK / 16; ++kk) {
      const unsigned long long da = desc_a(st + wg * 64 * 128 + kk * 32);
      wgmma_step(acc.h0, acc.h1, da, st + kABytes + kk * 2048);
    }
    wgmma_commit();
    wgmma_wait<1>();  // keep one group in flight: k-tile kt - 1 is done
    fence_operand(acc.h0);
    fence_operand(acc.h1);
  }
  wgmma_wait<0>();
  fence_operand(acc.h0);
  fence_operand(acc.h1);
}

#endif

// Phase 1: h[m0 + r, n0 + c] = silu(gate) * up for the tile's BM x BN/2 block.
__device__ __forceinline__ void epilogue_h(Acc& acc, T* h, long long M, long long H, long long m0,
                                           long long n0, int tid, bool vec) {
  const int lane = tid & 31;
  const long long r = m0 + (tid >> 7) * 64 + ((tid >> 5) & 3) * 16 + (lane >> 2);
#if WIDE
  if (vec && m0 + BM <= M && n0 + BN / 2 <= H) {  // whole tile inside (the benchmark's case)
    Pair* p = reinterpret_cast<Pair*>(h + r * H + n0 + 2 * (lane & 3));
    Pair* q = p + 4 * H;  // row r + 8
#pragma unroll
    for (int j = 0; j < BN / 16; ++j) {
      p[4 * j] =
          pack2(silu_mul(acc.h0[4 * j], acc.h1[4 * j]), silu_mul(acc.h0[4 * j + 1], acc.h1[4 * j + 1]));
      q[4 * j] =
          pack2(silu_mul(acc.h0[4 * j + 2], acc.h1[4 * j + 2]),
                silu_mul(acc.h0[4 * j + 3], acc.h1[4 * j + 3]));
    }
    return;
  }
#endif
#pragma unroll
  for (int j = 0; j < BN / 16; ++j) {
    const long long c = n0 + 8 * j + 2 * (lane & 3);
    store2(h, H, M, H, r, c, silu_mul(acc.h0[4 * j], acc.h1[4 * j]),
           silu_mul(acc.h0[4 * j + 1], acc.h1[4 * j + 1]), vec);
    store2(h, H, M, H, r + 8, c, silu_mul(acc.h0[4 * j + 2], acc.h1[4 * j + 2]),
           silu_mul(acc.h0[4 * j + 3], acc.h1[4 * j + 3]), vec);
  }
}

// Phase 2: y[m0 + r, n0 + c] for the tile's BM x BN block.
__device__ __forceinline__ void epilogue_y(Acc& acc, T* y, long long M, long long D, long long m0,
                                           long long n0, int tid, bool vec) {
  const int lane = tid & 31;
  const long long r = m0 + (tid >> 7) * 64 + ((tid >> 5) & 3) * 16 + (lane >> 2);
#if WIDE
  if (vec && m0 + BM <= M && n0 + BN <= D) {  // whole tile inside (the benchmark's case)
    Pair* p = reinterpret_cast<Pair*>(y + r * D + n0 + 2 * (lane & 3));
    Pair* q = p + 4 * D;  // row r + 8
#pragma unroll
    for (int j = 0; j < BN / 16; ++j) {
      p[4 * j] = pack2(acc.h0[4 * j], acc.h0[4 * j + 1]);
      q[4 * j] = pack2(acc.h0[4 * j + 2], acc.h0[4 * j + 3]);
      p[BN / 4 + 4 * j] = pack2(acc.h1[4 * j], acc.h1[4 * j + 1]);
      q[BN / 4 + 4 * j] = pack2(acc.h1[4 * j + 2], acc.h1[4 * j + 3]);
    }
    return;
  }
#endif
#pragma unroll
  for (int j = 0; j < BN / 16; ++j) {
    const long long c = n0 + 8 * j + 2 * (lane & 3);
    store2(y, D, M, D, r, c, acc.h0[4 * j], acc.h0[4 * j + 1], vec);
    store2(y, D, M, D, r + 8, c, acc.h0[4 * j + 2], acc.h0[4 * j + 3], vec);
    store2(y, D, M, D, r, c + BN / 2, acc.h1[4 * j], acc.h1[4 * j + 1], vec);
    store2(y, D, M, D, r + 8, c + BN / 2, acc.h1[4 * j + 2], acc.h1[4 * j + 3], vec);
  }
}

// ---------------------------------------------------------------- ARCH 0: mma.sync
#else
constexpr int kWN = BN / 4;   // warp tile: 64 rows x kWN columns, 2 x 4 warps
constexpr int kJN = kWN / 8;  // n8 blocks per warp: the first half in tile columns [0, BN/2),
                              // the second half at the same offsets in [BN/2, BN)

__device__ __forceinline__ void ldmatrix_x4(unsigned (&r)[4], unsigned addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void ldmatrix_x4_trans(unsigned (&r)[4], unsigned addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void mma16816(float (&c)[4], const unsigned (&a)[4], unsigned b0,
                                         unsigned b1) {
  if constexpr (kIsBf16) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}

// Tile column of warp wn's n8 block j.
__device__ __forceinline__ int col_of(int wn, int j) {
  return (j < kJN / 2 ? 0 : BN / 2) + wn * (kWN / 2) + 8 * (j % (kJN / 2));
}

struct Acc {
  float v[4][kJN][4];  // [m16 block][n8 block][mma C fragment]
};

__device__ __forceinline__ void mainloop(const TileSrc& t, unsigned char* smem, int tid, bool vec,
                                         Acc& acc) {
#pragma unroll
  for (int mi = 0; mi < 4; ++mi)
#pragma unroll
    for (int j = 0; j < kJN; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc.v[mi][j][e] = 0.f;
  const int kt_count = static_cast<int>((t.k + BK - 1) / BK);
  VecLoader<NTHREADS> v;
  v.setup(t, tid);
  for (int s = 0; s < kPref; ++s) {
    if (s < kt_count) load_tile(t, v, smem, s, tid, vec);
    cp_async_commit();
  }
  const unsigned base = smem_u32(smem);
  const int lane = tid & 31, wm = tid >> 7, wn = (tid >> 5) & 3;
  for (int kt = 0; kt < kt_count; ++kt) {
    cp_async_wait<kPref - 1>();
    __syncthreads();  // k-tile kt visible; everyone is done with k-tile kt - 1's slot
    if (kt + kPref < kt_count) load_tile(t, v, smem, kt + kPref, tid, vec);
    cp_async_commit();
    const unsigned st = base + (kt % STAGES) * kStageBytes;
#pragma unroll
    for (int kk = 0; kk < BK / 16; ++kk) {
      unsigned a[4][4];
#pragma unroll
      for (int mi = 0; mi < 4; ++mi) {
        ldmatrix_x4(a[mi], st + a_off(wm * 64 + mi * 16 + (lane & 15), kk * 2 + (lane >> 4)));
      }
      unsigned b[kJN][2];
#pragma unroll
      for (int j = 0; j < kJN; j += 2) {
        unsigned r[4];
        const int q = lane >> 3;
        const int kr = kk * 16 + (q & 1) * 8 + (lane & 7);
        ldmatrix_x4_trans(r, st + kABytes + b_off(kr, col_of(wn, j + (q >> 1)) >> 3));
        b[j][0] = r[0];
        b[j][1] = r[1];
        b[j + 1][0] = r[2];
        b[j + 1][1] = r[3];
      }
#pragma unroll
      for (int mi = 0; mi < 4; ++mi)
#pragma unroll
        for (int j = 0; j < kJN; ++j) mma16816(acc.v[mi][j], a[mi], b[j][0], b[j][1]);
    }
  }
}

__device__ __forceinline__ void epilogue_h(Acc& acc, T* h, long long M, long long H, long long m0,
                                           long long n0, int tid, bool vec) {
  const int lane = tid & 31, wm = tid >> 7, wn = (tid >> 5) & 3;
#pragma unroll
  for (int mi = 0; mi < 4; ++mi) {
    const long long r = m0 + wm * 64 + mi * 16 + (lane >> 2);
#pragma unroll
    for (int j = 0; j < kJN / 2; ++j) {
      const float* g = acc.v[mi][j];
      const float* u = acc.v[mi][j + kJN / 2];
      const long long c = n0 + col_of(wn, j) + 2 * (lane & 3);
      store2(h, H, M, H, r, c, silu_mul(g[0], u[0]), silu_mul(g[1], u[1]), vec);
      store2(h, H, M, H, r + 8, c, silu_mul(g[2], u[2]), silu_mul(g[3], u[3]), vec);
    }
  }
}

__device__ __forceinline__ void epilogue_y(Acc& acc, T* y, long long M, long long D, long long m0,
                                           long long n0, int tid, bool vec) {
  const int lane = tid & 31, wm = tid >> 7, wn = (tid >> 5) & 3;
#pragma unroll
  for (int mi = 0; mi < 4; ++mi) {
    const long long r = m0 + wm * 64 + mi * 16 + (lane >> 2);
#pragma unroll
    for (int j = 0; j < kJN; ++j) {
      const float* v = acc.v[mi][j];
      const long long c = n0 + col_of(wn, j) + 2 * (lane & 3);
      store2(y, D, M, D, r, c, v[0], v[1], vec);
      store2(y, D, M, D, r + 8, c, v[2], v[3], vec);
    }
  }
}
#endif

// ---------------------------------------------------------------- scheduling helpers
__device__ __forceinline__ bool aligned16(const void* p) {
  return (reinterpret_cast<unsigned long long>(p) & 15) == 0;
}

// Ticket -> tile. Row blocks are split into NG groups of gm; tickets run group by group, and
// inside a group column by column with the row block fastest (the group's tiles of one weight
// column run together, so each weight tile is read from DRAM about once per group).
__device__ __forceinline__ void tile_of(long long t, long long mt, long long gm, long long nt,
                                        long long* m, long long* n) {
  const long long g = t / (gm * nt), local = t - g * gm * nt;
  const long long gs = mt - g * gm < gm ? mt - g * gm : gm;
  *m = g * gm + local % gs;
  *n = local / gs;
}

__device__ __forceinline__ unsigned load_relaxed(const unsigned* p) {
  return *reinterpret_cast<const volatile unsigned*>(p);
}

// ---------------------------------------------------------------- cooperative kernel (ARCH 0, 1)
#if ARCH != 2
#if WIDE == 2
static_assert(ARCH == 1, "WIDE 2 is for ARCH 1");
__shared__ unsigned s_next_ticket, s_next_ready;
// WIDE 2, right after a tile's mainloop (every wgmma of it retired in this thread): hands the
// ticket claimed ahead (thread 0's `next`) to every thread in *ticket and, when that tile can
// start now (a phase-1 tile, or a phase-2 tile whose row block of h is complete: one poll, no
// waiting), issues its prologue so the loads fly during the current tile's epilogue. Returns
// whether it did. The __syncthreads also makes every warp's wgmma of the finished tile retired
// before the ring is refilled. A phase-2 tile found not ready waits later as usual.
__device__ __forceinline__ bool prefetch_next(unsigned next, long long cur, unsigned char* smem,
                                           int tid, bool vec, const T* x, const T* w1,
                                           const T* w3, const T* w2, const T* h,
                                           const unsigned* done, bool solo, bool per_row,
                                           long long mt, long long gm, long long nt1,
                                           long long nt2, long long t1, long long total,
                                           long long M, long long D, long long H,
                                           long long* ticket) {
  if (tid == 0) {
    unsigned ready = 0;
    if (next < t1) {
      ready = 1;
    } else if (next < total) {
      if (solo) {
        ready = cur >= t1;  // block 0 alone: every phase-1 tile is stored and fenced
      } else {
        long long m, n;
        tile_of(next - t1, mt, gm, nt2, &m, &n);
        const unsigned* c = per_row ? done + m : done;
        const long long need = per_row ? nt1 : t1;
        ready = static_cast<long long>(load_relaxed(c)) >= need;
        if (ready) __threadfence();  // acquire: the counted h stores, before our loads of h
      }
    }
    s_next_ticket = next;
    s_next_ready = ready;
  }
  __syncthreads();
  const long long t = s_next_ticket;
  const bool ready = s_next_ready != 0;
  *ticket = t;
  if (ready) {
    long long m, n;
    if (t < t1) {
      tile_of(t, mt, gm, nt1, &m, &n);
      prologue(TileSrc{x, w1, w3, D, H, M, H, D, m * BM, n * (BN / 2)}, smem, tid, vec);
    } else {
      tile_of(t - t1, mt, gm, nt2, &m, &n);
      prologue(TileSrc{h, w2, nullptr, H, D, M, D, H, m * BM, n * BN}, smem, tid, vec);
    }
  }
  return ready;
}
#endif
extern "C" __global__ void __launch_bounds__(NTHREADS, GRID / 132)
    fused_mlp(const T* __restrict__ x, const T* __restrict__ w1, const T* __restrict__ w3,
              const T* __restrict__ w2, T* __restrict__ y, T* h, int* sync, long long M,
              long long D, long long H) {
  extern __shared__ unsigned char smem_raw[];
  __shared__ unsigned s_ticket;
  // The swizzle is on address bits: the ring starts on a 1024-byte boundary (shared_bytes has
  // 1024 bytes of slack for this).
  unsigned char* smem = smem_raw + ((1024u - (smem_u32(smem_raw) & 1023u)) & 1023u);
  const int tid = threadIdx.x;
  const long long mt = (M + BM - 1) / BM;  // row blocks
  const long long nt1 = (H + BN / 2 - 1) / (BN / 2), nt2 = (D + BN - 1) / BN;
  const long long t1 = mt * nt1, total = t1 + mt * nt2;
  const long long gm = (mt + NG - 1) / NG;  // row blocks per group
  // sync holds M ints: sync[0] next ticket, sync[1] blocks finished, sync[2 + m] phase-1 tiles
  // of row block m finished when M >= 2 + mt (else sync[2] counts them all and phase 2 waits
  // for all of phase 1); with M < 3 one block does everything and uses no counters.
  const bool solo = M < 3;
  if (solo && blockIdx.x != 0) return;
  const bool per_row = M >= 2 + mt;
  unsigned* const queue = reinterpret_cast<unsigned*>(sync);
  unsigned* const exits = queue + 1;
  unsigned* const done = queue + 2;
  const bool vec = D % 8 == 0 && H % 8 == 0 && aligned16(x) && aligned16(w1) && aligned16(w3) &&
                   aligned16(w2) && aligned16(y) && aligned16(h);

  unsigned local_next = 0;  // solo mode's queue (thread 0)
  if (tid == 0) s_ticket = solo ? local_next++ : atomicAdd(queue, 1u);
  __syncthreads();
  long long ticket = s_ticket;
  bool all_waited = false;
#if WIDE == 2
  bool pre = false;  // this tile's prologue was issued during the previous tile's epilogue
#else
  constexpr bool pre = false;
#endif
  while (ticket < total) {
    unsigned next = 0;
    if (tid == 0) next = solo ? local_next++ : atomicAdd(queue, 1u);  // claimed ahead
    Acc acc;
    long long m, n;
    if (ticket < t1) {
      tile_of(ticket, mt, gm, nt1, &m, &n);
      const long long m0 = m * BM, n0 = n * (BN / 2);
      const TileSrc src{x, w1, w3, D, H, M, H, D, m0, n0};
#if WIDE == 2
      mainloop(src, smem, tid, vec, acc, pre);
      pre = prefetch_next(next, ticket, smem, tid, vec, x, w1, w3, w2, h, done, solo, per_row,
                          mt, gm, nt1, nt2, t1, total, M, D, H, &ticket);
#else
      mainloop(src, smem, tid, vec, acc);
#endif
      epilogue_h(acc, h, M, H, m0, n0, tid, vec);
      __threadfence();  // this thread's h stores are visible device-wide
      __syncthreads();
      if (!solo && tid == 0) atomicAdd(per_row ? done + m : done, 1u);
    } else {
      tile_of(ticket - t1, mt, gm, nt2, &m, &n);
      // Row block m of h must be complete. Its phase-1 tiles hold smaller tickets, all handed
      // out already to running blocks that never wait in phase 1: no deadlock.
      if (!solo && !all_waited && !pre) {
        if (tid == 0) {
          const unsigned* c = per_row ? done + m : done;
          const long long need = per_row ? nt1 : t1;
          while (static_cast<long long>(load_relaxed(c)) < need) __nanosleep(64);
          __threadfence();
        }
        __syncthreads();
        all_waited = !per_row;
      }
      const long long m0 = m * BM, n0 = n * BN;
      const TileSrc src{h, w2, nullptr, H, D, M, D, H, m0, n0};
#if WIDE == 2
      mainloop(src, smem, tid, vec, acc, pre);
      pre = prefetch_next(next, ticket, smem, tid, vec, x, w1, w3, w2, h, done, solo, per_row,
                          mt, gm, nt1, nt2, t1, total, M, D, H, &ticket);
      epilogue_y(acc, y, M, D, m0, n0, tid, vec);
    }
#else
      mainloop(src, smem, tid, vec, acc);
      epilogue_y(acc, y, M, D, m0, n0, tid, vec);
    }
    __syncthreads();  // all warps are done with the ring and with s_ticket
    if (tid == 0) s_ticket = next;
    __syncthreads();
    ticket = s_ticket;
#endif
  }
  if (!solo && tid == 0) {
    __threadfence();
    if (atomicAdd(exits, 1u) == gridDim.x - 1) {  // every block has made its last claim and wait
      atomicExch(queue, 0u);
      atomicExch(exits, 0u);
      const long long nc = per_row ? mt : 1;
      for (long long i = 0; i < nc; ++i) atomicExch(done + i, 0u);
    }
  }
}
#endif

// ---------------------------------------------------------------- warp-specialized kernel (ARCH 2)
// Warpgroup 0 produces: it claims tickets, waits for phase-2 dependencies and streams k-tiles
// into the ring with cp.async, each slot completing on its `full` mbarrier (cp.async arrivals);
// it runs ahead across tile boundaries, only held back by the slots' `empty` mbarriers.
// Warpgroups 1 and 2 consume: wgmma on each slot as it fills (one group in flight), release the
// slot when that group has retired, and run the epilogue at the end of a tile while the producer
// already fills the ring for the next one. Per slot the producer also leaves the ticket and the
// k-tile index (ticket -1 ends the stream).
#if ARCH == 2
constexpr int kProd = 128;

// Timeline hooks: empty here and in every kernel kiln verifies, times or exports.
// bench/fused_mlp_trace/trace_main.cu defines them before it includes an exported kernel, to
// record when each tile's wait began and ended and when its epilogue was done (the consumer
// warpgroups), and how long the producer waited for a row block of h.
#ifndef KILN_TRACE_AT
#define KILN_TRACE_AT(var)
#define KILN_TRACE_PUT(...)
#define KILN_TRACE_TILE()
#endif

__device__ __forceinline__ void mbar_init(unsigned addr, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(addr), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_arrive(unsigned addr) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(addr) : "memory");
}
// Arrives once all of this thread's earlier cp.async have landed (counted in the init count).
__device__ __forceinline__ void mbar_arrive_cp_async(unsigned addr) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(addr) : "memory");
}
__device__ __forceinline__ void mbar_wait(unsigned addr, unsigned parity) {
  unsigned ok = 0;
  do {
    asm volatile(
        "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        "selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(ok)
        : "r"(addr), "r"(parity)
        : "memory");
  } while (!ok);
}
__device__ __forceinline__ void named_barrier(int id, int count) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(count) : "memory");
}

#if TMA
constexpr int kEpiBytes = 64 * 128;  // one 64 x 64 block of y, 128-byte rows

__device__ __forceinline__ void mbar_arrive_expect_tx(unsigned addr, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(addr), "r"(bytes)
               : "memory");
}
// Orders this thread's global accesses through the generic proxy (ordinary loads, stores and
// the counters) with those through the async proxy (TMA), both ways.
__device__ __forceinline__ void fence_proxy_async_global() {
  asm volatile("fence.proxy.async.global;\n" ::: "memory");
}
// The box of `map` at (c0 innermost, c1) into shared memory at `dst`, its bytes completing on the
// mbarrier `bar` (the map is a __grid_constant__ parameter: its generic address).
__device__ __forceinline__ void tma_load_2d(unsigned dst, const kiln_tensor_map& map, long long c0,
                                            long long c1, unsigned bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, "
      "{%2, %3}], [%4];\n" ::"r"(dst),
      "l"(reinterpret_cast<unsigned long long>(&map)), "r"(static_cast<int>(c0)),
      "r"(static_cast<int>(c1)), "r"(bar)
      : "memory");
}
// The box of `map` at (c0, c1) from shared memory at `src`, in this thread's bulk group; elements
// outside the tensor are not written.
__device__ __forceinline__ void tma_store_2d(const kiln_tensor_map& map, long long c0, long long c1,
                                             unsigned src) {
  asm volatile(
      "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];\n" ::"l"(
          reinterpret_cast<unsigned long long>(&map)),
      "r"(static_cast<int>(c0)), "r"(static_cast<int>(c1)), "r"(src)
      : "memory");
  asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
}
// Waits until at most N of this thread's bulk groups still read shared memory.
template <int N>
__device__ __forceinline__ void tma_store_wait_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(N) : "memory");
}

// Accumulator half `v` (n8 blocks [jb, jb + 8) of it) of this thread, as one 64 x 64 block of T
// in `buf`: row r, 16-byte chunk c at r * 128 + (c ^ (r & 7)) * 16 (the map's 128-byte swizzle, and
// a warp's 4-byte writes land in 32 different banks).
// kSilu: the block of h instead, silu(v) * u elementwise (v the gate, u the up accumulators).
template <bool kSilu = false>
__device__ __forceinline__ void put_block(const float (&v)[kAcc], const float (&u)[kAcc], int jb,
                                          unsigned buf, int wq, int lane) {
#pragma unroll
  for (int hf = 0; hf < 2; ++hf) {
    const int r = wq * 16 + (lane >> 2) + 8 * hf;
#pragma unroll
    for (int c = 0; c < 8; ++c) {
      const int j = jb + c, e = 4 * j + 2 * hf;
      const Pair pr =
          kSilu ? pack2(silu_mul(v[e], u[e]), silu_mul(v[e + 1], u[e + 1])) : pack2(v[e], v[e + 1]);
      const unsigned at = buf + r * 128 + ((c ^ (r & 7)) << 4) + 4 * (lane & 3);
      asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(at),
                   "r"(*reinterpret_cast<const unsigned*>(&pr))
                   : "memory");
    }
  }
}

// Consumer warpgroup cw's 64 rows of a tile at (m0, n0), a 64 x 64 block at a time through its
// two buffers at `bufs` (a buffer is refilled once the store before last has read it); one thread
// of the warpgroup issues the stores. kH: a phase-1 tile's BN/2 columns of h = silu(gate) * up,
// whose rows the caller counts only after release_h (the stores are still in flight when this
// returns); else a phase-2 tile's BN columns of y.
template <bool kH>
__device__ __forceinline__ void store_tile_tma(const Acc& acc, int cw, int ctid, long long m0,
                                               long long n0, const kiln_tensor_map& map,
                                               unsigned bufs) {
  const int lane = ctid & 31, wq = (ctid >> 5) & 3;
  const bool leader = (ctid & 127) == 0;
#pragma unroll
  for (int blk = 0; blk < (kH ? BN / 128 : BN / 64); ++blk) {
    const unsigned buf = bufs + (blk & 1) * kEpiBytes;
    if (leader) tma_store_wait_read<1>();
    named_barrier(4 + cw, 128);
    if (kH) {
      put_block<true>(acc.h0, acc.h1, blk * 8, buf, wq, lane);
    } else if (blk < BN / 128) {
      put_block(acc.h0, acc.h0, blk * 8, buf, wq, lane);
    } else {
      put_block(acc.h1, acc.h1, (blk - BN / 128) * 8, buf, wq, lane);
    }
    fence_proxy_async();  // the generic writes, before the TMA engine reads the buffer
    named_barrier(4 + cw, 128);
    if (leader) tma_store_2d(map, n0 + 64 * blk, m0 + 64 * cw, buf);
  }
}
#if HTMA
// The warpgroup leader's late count of its half of a phase-1 tile: once every bulk store it
// issued has completed (h written), the writes are ordered before the counter's release, across
// the proxies (the reader acquires and then loads h through TMA).
__device__ __forceinline__ void release_h(unsigned*& pending, bool leader) {
  if (pending == nullptr) return;
  if (leader) {
    asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory");
    fence_proxy_async_global();
    __threadfence();
    atomicAdd(pending, 1u);
  }
  pending = nullptr;
}
// Whether slot `addr` has completed phase `parity` (never blocks).
__device__ __forceinline__ bool mbar_test(unsigned addr, unsigned parity) {
  unsigned ok;
  asm volatile(
      "{\n.reg .pred p;\nmbarrier.test_wait.parity.shared::cta.b64 p, [%1], %2;\n"
      "selp.u32 %0, 1, 0, p;\n}\n"
      : "=r"(ok)
      : "r"(addr), "r"(parity)
      : "memory");
  return ok != 0;
}
#define KILN_HTMA_PARAM , const __grid_constant__ kiln_tensor_map h_out
#else
#define KILN_HTMA_PARAM
#endif
#define KILN_TMA_PARAMS                                 \
  , const __grid_constant__ kiln_tensor_map x_tiles,    \
      const __grid_constant__ kiln_tensor_map w1_tiles, \
      const __grid_constant__ kiln_tensor_map w3_tiles, \
      const __grid_constant__ kiln_tensor_map h_tiles,  \
      const __grid_constant__ kiln_tensor_map w2_tiles, \
      const __grid_constant__ kiln_tensor_map y_tiles KILN_HTMA_PARAM
#else
#define KILN_TMA_PARAMS
#endif

extern "C" __global__ void __launch_bounds__(kProd + 256, 1)
    fused_mlp(const T* __restrict__ x, const T* __restrict__ w1, const T* __restrict__ w3,
              const T* __restrict__ w2, T* __restrict__ y, T* h, int* sync, long long M,
              long long D, long long H KILN_TMA_PARAMS) {
  extern __shared__ unsigned char smem_raw[];
  __shared__ unsigned long long s_full[STAGES], s_empty[STAGES];
  __shared__ int s_meta[STAGES][2];  // ticket (-1: end of stream), k-tile
  __shared__ unsigned s_ticket, s_done;
  unsigned char* smem = smem_raw + ((1024u - (smem_u32(smem_raw) & 1023u)) & 1023u);
  const int tid = threadIdx.x;
  const long long mt = (M + BM - 1) / BM;
  const long long nt1 = (H + BN / 2 - 1) / (BN / 2), nt2 = (D + BN - 1) / BN;
  const long long t1 = mt * nt1, total = t1 + mt * nt2;
  const long long gm = (mt + NG - 1) / NG;
  const int kt1 = static_cast<int>((D + BK - 1) / BK), kt2 = static_cast<int>((H + BK - 1) / BK);
  // Counters as in the cooperative kernel; with M < 3 block 0 works alone and counts its
  // finished phase-1 tiles in shared memory.
  const bool solo = M < 3;
  if (solo && blockIdx.x != 0) return;
  const bool per_row = !solo && M >= 2 + mt;
  unsigned* const queue = reinterpret_cast<unsigned*>(sync);
  unsigned* const exits = queue + 1;
  unsigned* const done = solo ? &s_done : queue + 2;
  const bool vec = D % 8 == 0 && H % 8 == 0 && aligned16(x) && aligned16(w1) && aligned16(w3) &&
                   aligned16(w2) && aligned16(y) && aligned16(h);
  const unsigned full0 = smem_u32(&s_full[0]), empty0 = smem_u32(&s_empty[0]);
  const bool tma = TMA && vec;  // rows 16-byte aligned: kiln encoded the maps
  // Counts that complete a phase-1 tile: HTMA, one per consumer warpgroup; else one per tile.
  const long long parts = HTMA && tma ? 2 : 1;
  if (tid == 0) {
    for (int s = 0; s < STAGES; ++s) {
      // cp.async: one arrival per producer thread + the meta writer; TMA: the writer's expect-tx
      mbar_init(full0 + 8 * s, tma ? 1 : kProd + 1);
      mbar_init(empty0 + 8 * s, 8);         // one per consumer warp
    }
    s_done = 0;
  }
  __syncthreads();

  // The role as a warp-uniform value (ptxas then sees the consumers' wgmma in converged code).
  const int role = __shfl_sync(0xffffffffu, tid / kProd, 0);
  if (role == 0) {
    if (tma) {
#if TMA
      // ------------------------------------------------ producer, TMA: thread 0 alone
      // Claims each ticket one tile ahead (as WIDE below) and fills slot g % STAGES with k-tile g:
      // the meta, then the expect-tx arrival, then the boxes (A, then B's 64-column atoms: w1's
      // then w3's columns in phase 1, w2's in phase 2).
      if (tid == 0) {
        unsigned g = 0, local_next = 0;
        unsigned ahead = solo ? local_next++ : atomicAdd(queue, 1u);
        for (;;) {
          const long long ticket = ahead;
          if (ahead < total) ahead = solo ? local_next++ : atomicAdd(queue, 1u);
          if (ticket >= total) {
            const int s = static_cast<int>(g % STAGES);
            if (g >= STAGES) mbar_wait(empty0 + 8 * s, (g / STAGES - 1) & 1);
            s_meta[s][0] = -1;
            mbar_arrive(full0 + 8 * s);
            break;
          }
          const bool phase1 = ticket < t1;
          long long m, n;
          if (phase1) {
            tile_of(ticket, mt, gm, nt1, &m, &n);
          } else {
            tile_of(ticket - t1, mt, gm, nt2, &m, &n);
            // Row block m of h must be complete (see the cp.async producer below); then the
            // counted generic stores of h, before this thread's TMA reads of it.
            const unsigned* c = per_row ? done + m : done;
            const long long need = (per_row ? nt1 : t1) * parts;
            KILN_TRACE_AT(dep_from);
            while (static_cast<long long>(load_relaxed(c)) < need) __nanosleep(64);
            KILN_TRACE_PUT(2, ticket, dep_from, trace_now(), 0);
            __threadfence();
            fence_proxy_async_global();
          }
          const long long m0 = m * BM, n0 = phase1 ? n * (BN / 2) : n * BN;
          const int kt_count = phase1 ? kt1 : kt2;
          for (int kt = 0; kt < kt_count; ++kt, ++g) {
            const int s = static_cast<int>(g % STAGES);
            if (g >= STAGES) mbar_wait(empty0 + 8 * s, (g / STAGES - 1) & 1);
            s_meta[s][0] = static_cast<int>(ticket);
            s_meta[s][1] = kt;
            const unsigned st = smem_u32(smem + s * kStageBytes), full = full0 + 8 * s;
            const long long k0 = static_cast<long long>(kt) * BK;
            mbar_arrive_expect_tx(full, kStageBytes);
            if (phase1) {
              tma_load_2d(st, x_tiles, k0, m0, full);
#pragma unroll
              for (int a = 0; a < BN / 128; ++a) {
                tma_load_2d(st + kABytes + a * kAtomBytes, w1_tiles, n0 + 64 * a, k0, full);
                tma_load_2d(st + kABytes + (BN / 128 + a) * kAtomBytes, w3_tiles, n0 + 64 * a, k0,
                            full);
              }
            } else {
              tma_load_2d(st, h_tiles, k0, m0, full);
#pragma unroll
              for (int a = 0; a < BN / 64; ++a)
                tma_load_2d(st + kABytes + a * kAtomBytes, w2_tiles, n0 + 64 * a, k0, full);
            }
          }
        }
      }
#endif
    } else {
      // ------------------------------------------------ producer, cp.async

      unsigned g = 0;  // k-steps issued so far (all tiles)
      unsigned local_next = 0;
      VecLoader<kProd> v;
      // WIDE: thread 0 claims each ticket one tile ahead, so the atomic's round trip overlaps the
      // previous tile's loads (it stops claiming once it has handed out a ticket >= total: the
      // exit count below still comes after this block's last claim). A ticket claimed ahead while
      // this block streams a phase-1 tile is processed right after it, without any wait; one
      // claimed during a phase-2 tile is itself a phase-2 ticket: the no-deadlock argument holds.
      unsigned ahead = 0;
      if (WIDE && tid == 0) ahead = solo ? local_next++ : atomicAdd(queue, 1u);
      for (;;) {
        if (tid == 0) {
          if (WIDE) {
            s_ticket = ahead;
            if (ahead < total) ahead = solo ? local_next++ : atomicAdd(queue, 1u);
          } else {
            s_ticket = solo ? local_next++ : atomicAdd(queue, 1u);
          }
        }
        named_barrier(1, kProd);
        const long long ticket = s_ticket;
        named_barrier(1, kProd);
        if (ticket >= total) {
          const int s = static_cast<int>(g % STAGES);
          if (g >= STAGES) mbar_wait(empty0 + 8 * s, (g / STAGES - 1) & 1);
          if (tid == 0) {
            s_meta[s][0] = -1;
            mbar_arrive(full0 + 8 * s);
          }
          mbar_arrive(full0 + 8 * s);
          break;
        }
        long long m, n;
        TileSrc src;
        int kt_count;
        if (ticket < t1) {
          tile_of(ticket, mt, gm, nt1, &m, &n);
          src = TileSrc{x, w1, w3, D, H, M, H, D, m * BM, n * (BN / 2)};
          kt_count = kt1;
        } else {
          tile_of(ticket - t1, mt, gm, nt2, &m, &n);
          // Row block m of h must be complete: its phase-1 tiles hold smaller tickets, handed out
          // to running blocks whose phase-1 work never waits.
          if (tid == 0) {
            const unsigned* c = per_row ? done + m : done;
            const long long need = (per_row ? nt1 : t1) * parts;
            while (static_cast<long long>(load_relaxed(c)) < need) __nanosleep(64);
            __threadfence();
          }
          named_barrier(1, kProd);
          src = TileSrc{h, w2, nullptr, H, D, M, D, H, m * BM, n * BN};
          kt_count = kt2;
        }
        v.setup(src, tid);
        for (int kt = 0; kt < kt_count; ++kt, ++g) {
          const int s = static_cast<int>(g % STAGES);
          if (g >= STAGES) mbar_wait(empty0 + 8 * s, (g / STAGES - 1) & 1);
          unsigned char* stage = smem + s * kStageBytes;
          if (vec) {
            v.load(src.b0, smem_u32(stage), kt, tid);
            mbar_arrive_cp_async(full0 + 8 * s);
          } else {
            load_scalar<kProd>(src, stage, kt, tid);
            mbar_arrive(full0 + 8 * s);
          }
          if (tid == 0) {
            s_meta[s][0] = static_cast<int>(ticket);
            s_meta[s][1] = kt;
            mbar_arrive(full0 + 8 * s);
          }
        }
      }
    }
    named_barrier(3, kProd + 256);  // everyone is past their last counter update
    if (!solo && tid == 0) {
      __threadfence();
      if (atomicAdd(exits, 1u) == gridDim.x - 1) {  // every block has made its last claim and wait
        atomicExch(queue, 0u);
        atomicExch(exits, 0u);
        const long long nc = per_row ? mt : 1;
        for (long long i = 0; i < nc; ++i) atomicExch(done + i, 0u);
      }
    }
  } else {
    // ------------------------------------------------ consumers

    const int ctid = tid - kProd, cw = ctid >> 7, lane = tid & 31;
    const unsigned base = smem_u32(smem);
    unsigned g = 0;  // k-steps consumed so far (all tiles)
    Acc acc;
#if HTMA
    unsigned* pending = nullptr;  // the counter of this warpgroup's last h tile, not yet counted
    const bool leader = (ctid & 127) == 0;
#endif
    for (;;) {
      int s = static_cast<int>(g % STAGES);
      KILN_TRACE_AT(wait_from);
#if HTMA
      // The next tile may wait for the row block counted late: count it before blocking.
      if (pending != nullptr && !mbar_test(full0 + 8 * s, (g / STAGES) & 1))
        release_h(pending, leader);
#endif
      mbar_wait(full0 + 8 * s, (g / STAGES) & 1);
      const int ticket = s_meta[s][0];
      if (ticket < 0) break;
      KILN_TRACE_AT(full_at);
      const bool phase1 = ticket < t1;
      const int kt_count = phase1 ? kt1 : kt2;
#pragma unroll
      for (int i = 0; i < kAcc; ++i) acc.h0[i] = acc.h1[i] = 0.f;
      for (int kt = 0; kt < kt_count; ++kt, ++g) {
        if (kt > 0) {
          s = static_cast<int>(g % STAGES);
          mbar_wait(full0 + 8 * s, (g / STAGES) & 1);
        }
        if (!tma) fence_proxy_async();  // the slot's generic-proxy writes, seen by the tensor cores
        const unsigned st = base + s * kStageBytes;
        fence_operand(acc.h0);
        fence_operand(acc.h1);
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < BK / 16; ++kk) {
          const unsigned long long da = desc_a(st + cw * 64 * 128 + kk * 32);
          wgmma_step(acc.h0, acc.h1, da, st + kABytes + kk * 2048);
        }
        wgmma_commit();
#if HTMA
        if (kt == 1) release_h(pending, leader);  // the last tile's h stores had a k-step
#endif
        wgmma_wait<1>();  // the previous k-step's group has retired: release its slot
        fence_operand(acc.h0);
        fence_operand(acc.h1);
        if (kt > 0 && lane == 0) mbar_arrive(empty0 + 8 * static_cast<int>((g - 1) % STAGES));
      }
#if HTMA
      release_h(pending, leader);  // a one-k-step tile: its buffers and counter are taken next
#endif
      wgmma_wait<0>();
      fence_operand(acc.h0);
      fence_operand(acc.h1);
      if (lane == 0) mbar_arrive(empty0 + 8 * static_cast<int>((g - 1) % STAGES));
      long long m, n;
      if (phase1) {
        tile_of(ticket, mt, gm, nt1, &m, &n);
#if HTMA
        if (tma) {
          store_tile_tma<true>(acc, cw, ctid, m * BM, n * (BN / 2), h_out,
                               base + STAGES * kStageBytes + cw * 2 * kEpiBytes);
          pending = per_row ? done + m : done;
          KILN_TRACE_TILE();
          continue;
        }
#endif
        epilogue_h(acc, h, M, H, m * BM, n * (BN / 2), ctid, vec);
#if TMA
        if (tma) fence_proxy_async_global();  // h is read through the async proxy (TMA)
#endif
        __threadfence();  // this thread's h stores are visible device-wide
        named_barrier(2, 256);
        if (ctid == 0) atomicAdd(per_row ? done + m : done, 1u);
      } else {
        tile_of(ticket - t1, mt, gm, nt2, &m, &n);
#if TMA
        if (tma) {
          store_tile_tma<false>(acc, cw, ctid, m * BM, n * BN, y_tiles,
                                base + STAGES * kStageBytes + cw * 2 * kEpiBytes);
          KILN_TRACE_TILE();
          continue;
        }
#endif
        epilogue_y(acc, y, M, D, m * BM, n * BN, ctid, vec);
      }
      KILN_TRACE_TILE();
    }
#if HTMA
    release_h(pending, leader);
#endif
#if TMA
    if (tma && (ctid & 127) == 0) tma_store_wait_read<0>();  // the buffers outlive their stores
#endif
    named_barrier(3, kProd + 256);
  }
}
#endif
