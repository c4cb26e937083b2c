// Matmul template: C[M,N] = A[M,K] @ B[K,N], all row-major, T (f16 or bf16) in and out, fp32
// accumulation on the tensor cores. Two structural variants (IMPL):
//
//  IMPL 0 -- mma.sync (warp-level). A block of WM x WN warps computes a BM x BN tile of C; each
//    warp a (BM/WM) x (BN/WN) sub-tile as m16n8k16 fragments. K is walked in BK slices through a
//    STAGES-deep ring of shared-memory stages: global -> shared with cp.async (16 bytes per
//    thread, no registers involved), `cp.async.wait_group STAGES-2` + one __syncthreads per
//    slice, the refill of the stage freed by the previous slice issued before the math so loads
//    run STAGES-1 slices ahead. shared -> registers with ldmatrix: A (K contiguous) with
//    ldmatrix.x4, B (N contiguous, i.e. "k-major rows") with ldmatrix.x4.trans, which hands each
//    thread the column-major ("col") B fragment that mma.sync ...row.col wants.
//  IMPL 1 -- wgmma (sm_90a warpgroups), warp-specialized. Two consumer warpgroups each own BM/2
//    rows x BN columns of C in registers (wgmma m64nBNk16, f32 accumulators); a producer
//    warpgroup fills the STAGES-deep ring with cp.async. Per stage two mbarriers: `full` (each
//    producer thread's cp.async.mbarrier.arrive.noinc fires once its copies have landed) and
//    `empty` (each consumer warp arrives once the wgmma that read the stage has retired, i.e.
//    after wgmma.wait_group 1 one slice later). The consumers' wgmma read A and B straight from
//    shared memory through matrix descriptors (128-byte swizzle; A K-major, B N-major =
//    "transposed").
//    CL 1 / 2 (clusters of 2 CTAs, __cluster_dims__): the two CTAs of a cluster compute
//    vertically (CL 1) or horizontally (CL 2) adjacent tiles and so need the same B (CL 1) or A
//    (CL 2) slice. Each CTA loads only its half of that shared operand (plus all of the other
//    one) with cp.async, then one thread copies that half into the same place of the peer's stage
//    with a 1-D bulk copy (cp.async.bulk shared::cta -> shared::cluster; the swizzled layout
//    moves as plain bytes since both stages are 1024-byte aligned at the same offset), completing
//    its bytes on the peer's `full` barrier (expect-tx). L2 -> SM traffic per CTA drops by a
//    third (CL 1, 128x256). Stage reuse needs both CTAs' consumers: `empty` counts the consumer
//    warps of both CTAs (remote arrive through mapa). 3 producer warps load, the 4th sends.
//    SK 2 / 3 / 4 / 8 (split-K, CL 0 and PERS 0 only): a cluster of SK CTAs computes one tile,
//    CTA `rank` the K slices [rank * KT / SK, (rank + 1) * KT / SK). For few rows (M = 128
//    tokens) the tiles alone leave most SMs idle. Each CTA stores its f32 partial tile in its own
//    shared memory; after a cluster barrier, CTA `rank` sums rows [rank * R, +R) (R = BM / SK
//    rounded up) of all SK partials through distributed shared memory in rank order 0, 1, ...
//    (the same order every run: bitwise deterministic, no workspace, no atomics) and writes them
//    to C; a second cluster barrier keeps every partial alive until its readers are done.
//    TMA 1: one producer thread fills a stage with the Tensor Memory Accelerator instead of 128
//    threads with cp.async: A as one BM x 64 box, B as BN/64 boxes of 64 x 64, through the
//    tensor maps kiln encodes (target.json "tensor_maps", 128-byte swizzle: exactly the layouts
//    below), completing STAGE_BYTES on the stage's `full` barrier (expect-tx). Out-of-range
//    elements arrive as zeros. Where rows are not 16-byte aligned kiln passes zero maps and the
//    cp.async path (mode 2) runs instead. With clusters (CL 1 / 2) the shared operand's half is
//    multicast: each CTA's producer loads its half of B (CL 1) or A (CL 2, boxes of BM/2 rows)
//    once and the TMA engine writes it into the same place of both CTAs' stages and completes
//    its bytes on both CTAs' `full` barriers; the peer's half arrives the same way, so each
//    `full` still expects STAGE_BYTES, and `empty` counts the consumers of both CTAs as for the
//    cp.async clusters (a producer writes into the peer's stage only once both have released it).
//    PERS 1: persistent CTAs (grid = 132, or 66 clusters) walk the tiles unit0, unit0 + grid,
//    ...; the ring's stages and barrier phases run on across tiles (global slice counter), the
//    last slice of a tile is released after wgmma.wait_group 0, and C is written straight from
//    the accumulators (4-byte column-pair stores) while the producers already load the next
//    tile's slices, so the epilogue and the pipeline fill overlap.
//    PERS 2 (TMA 1, CL 0; 128 x 256, 256 x 128 and 128 x 192 tiles with 4 stages, 128 x 128 with
//    5 or 6):
//    persistent, and the tile leaves through shared memory and TMA stores:
//    each consumer warpgroup writes its rows as 64 x 64 blocks into two 8 KB buffers of its own
//    (128-byte swizzle, so a warp's fragment writes hit 32 different banks), and one of its
//    threads hands each block to the TMA engine (tensor map c_tiles; out-of-range rows and columns
//    are not written) and goes straight on to the next tile while the engine writes C; a buffer
//    is refilled once the store before last has read it (cp.async.bulk.wait_group.read 1). The
//    fragment stores of PERS 1 hit 8 rows of C per warp instruction, half a sector each; these
//    move whole lines and leave the warpgroups free sooner. Rows of C that are not 16-byte
//    aligned take PERS 1's stores.
//    PERS 3 (TMA 1; BM x BN = 128 x 128 or 64 x 256, 4 to 6 stages): ping-pong. As PERS 2,
//    but each consumer warpgroup owns whole tiles instead of half of every tile: warpgroup 0 takes
//    the CTA's 1st, 3rd, ... tile, warpgroup 1 the 2nd, 4th, .... The producer fills the ring in
//    the CTA's tile order as before, so a stage is consumed by one warpgroup (`empty` counts its 4
//    warps). Two named barriers hand the tensor cores over: a warpgroup issues a tile's wgmma only
//    once the other has issued all of its previous tile's, so the two main loops run one after
//    the other at full rate while each warpgroup's epilogue (TMA stores through its own buffers)
//    and its wait for the next tile's first slices overlap the other's main loop. In PERS 1 / 2
//    both warpgroups finish a tile together and the tensor cores idle through the epilogue.
//    A warpgroup's tile is half as large as in PERS 2, so the CTA loads a third more per result
//    from L2 (at 4096^3 more than L2 delivers); with CL 1 / 2 the cluster's multicast takes that
//    back. Both CTAs of a cluster walk the same units, so a stage is read by the same warpgroup
//    in each, and `empty` counts its 4 warps in both CTAs.
//
//    PERS 4 (as PERS 2): stream-K for the last, partial wave. T tiles on G persistent CTAs leave
//    T % G tiles for a last wave in which G - T % G CTAs idle (at 4096^3, 512 tiles of 128 x 256
//    on 132 CTAs: 116 of them take a 4th tile, 16 wait). With PERS 4 the first T - T % G tiles
//    are shared out as before and the K slices of the rest are cut into G equal, contiguous
//    ranges, one per CTA (CTA c: slices [c * S / G, (c + 1) * S / G) of the S = (T % G) * KT).
//    A range is shorter than a tile's KT slices, so it holds the end of one tile and maybe the
//    start of the next. The CTA whose piece starts a tile (k = 0) owns it: it runs that piece
//    last, then adds the other pieces' partial sums (kept in f32 by the CTAs after it, which ran
//    them first) in CTA order, so every run adds in the same order, and writes C. A piece that
//    does not start its tile is written to the CTA's slot of the scratch buffer `ws` (f32, each
//    thread its accumulators as float4, coalesced) and flagged (release); its owner waits on the
//    flag (acquire), reads the slot and sets the flag back to 0, leaving `ws` as it found it. The
//    flags are `ws`'s first 2 G words (one per CTA and consumer warpgroup), the slots follow
//    from word 1024; where they do not fit in M x N floats every tile is shared out whole.
//    A CTA writes its partial (its first piece) before it waits on anyone's, and waits only on
//    CTAs after it: with the grid resident (132 CTAs, one per SM) the waits end at once; with
//    fewer SMs the lowest resident owner finishes and frees an SM for the next, as long as two
//    CTAs fit at a time (a device with one free SM would wait for ever: kiln's timeout ends it).

// Shared-memory layouts (both variants), in 16-byte chunks of 8 elements, XOR-swizzled so that
// the 8 row addresses of an ldmatrix (or a wgmma core matrix) and the 8 chunks written by 8
// consecutive threads fall in 8 different bank groups:
//   A stage: BM rows of BK elements. BK = 64: row r = 128 bytes, chunk c stored at c ^ (r & 7)
//     (exactly the hardware 128B swizzle). BK = 32: row = 64 bytes, chunk c at c ^ ((r >> 1) & 3)
//     (the 64B swizzle).
//   B stage: BK rows (k) of BN elements, kept as BN/64 column blocks of BK rows x 128 bytes;
//     within a block chunk c of row r stored at c ^ (r & 7) (the wgmma N-major 128B-swizzle atom:
//     LBO = block stride, SBO = 8 rows = 1024 bytes).
// The stage base is 1024-byte aligned (the swizzle is a function of the address bits).
//
// Fragment layouts (g = lane / 4, t = lane % 4), mma.sync m16n8k16 and per n8 block of wgmma:
//   A (16x16): a0 = (row g, k 2t..2t+1), a1 = (g+8, 2t..), a2 = (g, 8+2t..), a3 = (g+8, 8+2t..).
//   B (16x8):  b0 = (k 2t..2t+1, col g), b1 = (k 8+2t.., col g).
//   C (16x8, f32): c0,c1 = (row g, cols 2t, 2t+1), c2,c3 = (row g+8, same cols); for wgmma
//   m64nN warp w of the warpgroup holds rows 16w.. of the 64 and accumulator 4j+i belongs to the
//   n8 block j.
//
// Boundaries: M, N, K are arbitrary. Every tile is loaded in one of three modes: 0 = fully in
// range with 16-byte aligned rows (plain cp.async, the benchmark's only path), 1 = partly out of
// range (cp.async with src-size 0 zero-fills the chunks outside; K and N multiples of 8 make
// every chunk all-in or all-out), 2 = rows not 16-byte aligned (K or N not a multiple of 8, or a
// misaligned base): scalar guarded loads, zeros outside, st.shared. Zeros in both A and B beyond
// K keep Inf/NaN from leaking in (0 * 0). The epilogue converts the accumulators to T into a
// padded shared-memory tile and writes C with coalesced 16-byte stores (guarded, element-wise at
// the ragged right edge or when rows of C are not 16-byte aligned).
// Blocks are mapped to tiles in groups of GROUP_M tile rows (column-major within a group) so
// that the blocks resident at one time share panels of A and B in L2 (the rasterization order:
// GROUP_M 1 walks the tiles row by row; which group height pays depends on the shape, as the
// panels of A and B that the resident tiles touch outgrow L2).

#ifndef IMPL
#define IMPL 0  // 0: mma.sync, 1: wgmma (warp-specialized)
#endif
#ifndef BM
#define BM 128  // block tile rows (M)
#endif
#ifndef BN
#define BN 128  // block tile columns (N); IMPL 1: 128, 192 or 256
#endif
#ifndef BK
#define BK 32  // K slice per pipeline stage (IMPL 1: 64)
#endif
#ifndef WM
#define WM 2  // IMPL 0: warps along M
#endif
#ifndef WN
#define WN 4  // IMPL 0: warps along N
#endif
#ifndef STAGES
#define STAGES 4  // shared-memory pipeline depth
#endif
#ifndef CL
#define CL 0  // IMPL 1: 0 one CTA per tile; 1/2: CTA pairs (cluster 2) sharing B/A slices (DSMEM)
#endif
#ifndef PERS
#define PERS \
  0  // IMPL 1: 1 = persistent CTAs walking the tiles, epilogue from registers;
     // 2 = persistent, epilogue through shared memory and TMA stores (TMA 1, CL 0);
     // 3 = as 2, ping-pong: each consumer warpgroup owns every other tile;
     // 4 = as 2, with the last partial wave's K slices split over all CTAs (stream-K)
#endif
#ifndef GROUP_M
#define GROUP_M 8  // tile rows per raster group
#endif
#ifndef SK
#define SK 1  // IMPL 1: K split over a cluster of SK CTAs per tile, reduced through DSMEM
#endif
#ifndef TMA
#define TMA 0  // IMPL 1, CL 0: 1 = one producer thread loads each stage with TMA
#endif

typedef unsigned int u32;
typedef unsigned long long u64;

template <typename X>
struct IsBf16 {
  static constexpr bool value = false;
};
template <>
struct IsBf16<__nv_bfloat16> {
  static constexpr bool value = true;
};
constexpr bool kBf16 = IsBf16<T>::value;

static_assert(sizeof(T) == 2, "the tensor-core template handles 16-bit element types only");
static_assert(BK == 32 || BK == 64, "BK is 32 or 64");
static_assert(BN % 64 == 0, "B is stored in 64-column blocks");
static_assert(STAGES >= 2, "at least two stages");

constexpr int SP = BN + 8;  // row pitch (elements) of the epilogue's staging tile: +16 bytes

// ---------------------------------------------------------------------------------------------
// Small PTX wrappers.
__device__ __forceinline__ u32 smem_addr(const void* p) {
  return static_cast<u32>(__cvta_generic_to_shared(p));
}
// 16-byte global -> shared copy; reads src_bytes (16 or 0) and zero-fills the rest.
__device__ __forceinline__ void cp_async_16(u32 dst, const void* src, u32 src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
               "r"(src_bytes)
               : "memory");
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}
__device__ __forceinline__ void st_shared_v4(u32 addr, u32 a, u32 b, u32 c, u32 d) {
  asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "r"(a), "r"(b), "r"(c),
               "r"(d)
               : "memory");
}
template <typename U>
__device__ __forceinline__ u32 bits16(U v) {
  if constexpr (IsBf16<U>::value)
    return __bfloat16_as_ushort(v);
  else
    return __half_as_ushort(v);
}
// Two floats -> two T (round to nearest) packed in 32 bits, the lower column in the low half.
__device__ __forceinline__ u32 pack2(float lo, float hi) {
  return bits16(from_f32<T>(lo)) | (bits16(from_f32<T>(hi)) << 16);
}

// ---------------------------------------------------------------------------------------------
// Shared-memory layouts: byte offset of 16-byte chunk c of row r within a stage's tile.
__device__ __forceinline__ u32 a_off(int r, int c) {  // A: BM rows x BK elements
  if constexpr (BK == 64)
    return r * 128 + ((c ^ (r & 7)) << 4);
  else
    return r * 64 + ((c ^ ((r >> 1) & 3)) << 4);
}
__device__ __forceinline__ u32 b_off(int r, int c) {  // B: BK rows x BN elements, 64-wide blocks
  return (c >> 3) * (BK * 128) + r * 128 + (((c & 7) ^ (r & 7)) << 4);
}

// Copies the ROWS x COLS tile whose top-left element is g[r0 * ld + c0] (valid rows < nrows,
// valid columns < ncols) into the shared-memory tile at dst, with NTHR threads (index tid).
// Each thread owns one 16-byte chunk column (c) and every RP-th row from rb. mode: see the top.
template <int ROWS, int COLS, int NTHR, bool IS_A>
__device__ __forceinline__ void load_tile(u32 dst, const T* __restrict__ g, long long ld,
                                          long long r0, long long c0, long long nrows,
                                          long long ncols, int tid, int mode) {
  constexpr int CPR = COLS / 8;  // chunks per row
  if constexpr (NTHR % CPR != 0) {
    // Rows of a width the threads do not divide (BN 192: 24 chunks): chunk q = tid + p * NTHR
    // of the tile is row q / CPR, chunk column q % CPR.
    constexpr int CHUNKS = ROWS * CPR, PASSES = (CHUNKS + NTHR - 1) / NTHR;
    const unsigned short* gs = reinterpret_cast<const unsigned short*>(g);
#pragma unroll
    for (int p = 0; p < PASSES; ++p) {
      const int q = tid + p * NTHR;
      if (CHUNKS % NTHR != 0 && q >= CHUNKS) continue;
      const int r = q / CPR, cc = q % CPR;
      const long long gr = r0 + r, gc = c0 + cc * 8;
      const u32 at = dst + (IS_A ? a_off(r, cc) : b_off(r, cc));
      if (mode != 2) {
        const bool ok = mode == 0 || (gr < nrows && gc < ncols);
        cp_async_16(at, ok ? g + gr * ld + gc : g, ok ? 16u : 0u);
      } else {
        u32 w[4];
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const long long c_lo = gc + 2 * e, c_hi = c_lo + 1;
          const u32 lo = (gr < nrows && c_lo < ncols) ? gs[gr * ld + c_lo] : 0u;
          const u32 hi = (gr < nrows && c_hi < ncols) ? gs[gr * ld + c_hi] : 0u;
          w[e] = lo | (hi << 16);
        }
        st_shared_v4(at, w[0], w[1], w[2], w[3]);
      }
    }
    return;
  }
  constexpr int RP = NTHR % CPR == 0 ? NTHR / CPR : 1;  // rows per pass
  constexpr int PASSES = (ROWS + RP - 1) / RP;  // the last pass is partial if RP does not divide
  constexpr bool RAGGED = ROWS % RP != 0;
  const int c = tid % CPR, rb = tid / CPR;
  const long long gc = c0 + c * 8;
  auto off = [](int r, int cc) { return IS_A ? a_off(r, cc) : b_off(r, cc); };
  if (mode == 0) {
    const T* gp = g + (r0 + rb) * ld + gc;
#pragma unroll
    for (int p = 0; p < PASSES; ++p) {
      if (RAGGED && rb + p * RP >= ROWS) continue;
      cp_async_16(dst + off(rb + p * RP, c), gp + p * RP * ld, 16);
    }
  } else if (mode == 1) {
    const bool col_ok = gc < ncols;
#pragma unroll
    for (int p = 0; p < PASSES; ++p) {
      if (RAGGED && rb + p * RP >= ROWS) continue;
      const long long gr = r0 + rb + p * RP;
      const bool ok = col_ok && gr < nrows;
      const T* src = ok ? g + gr * ld + gc : g;  // never read when !ok (src-size 0)
      cp_async_16(dst + off(rb + p * RP, c), src, ok ? 16u : 0u);
    }
  } else {
    const unsigned short* gs = reinterpret_cast<const unsigned short*>(g);
#pragma unroll 1
    for (int p = 0; p < PASSES; ++p) {
      if (RAGGED && rb + p * RP >= ROWS) continue;
      const long long gr = r0 + rb + p * RP;
      u32 w[4];
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const long long c_lo = gc + 2 * e, c_hi = c_lo + 1;
        const u32 lo = (gr < nrows && c_lo < ncols) ? gs[gr * ld + c_lo] : 0u;
        const u32 hi = (gr < nrows && c_hi < ncols) ? gs[gr * ld + c_hi] : 0u;
        w[e] = lo | (hi << 16);
      }
      st_shared_v4(dst + off(rb + p * RP, c), w[0], w[1], w[2], w[3]);
    }
  }
}

// Tile (tm, tn) of TM x TN tiles for block (or cluster) number pid: groups of GROUP_M tile rows,
// walked down the rows then across.
template <int TM = BM, int TN = BN>
__device__ __forceinline__ void tile_coords(long long M, long long N, int& tm, int& tn,
                                            int pid = blockIdx.x) {
  const int grid_m = static_cast<int>((M + TM - 1) / TM),
            grid_n = static_cast<int>((N + TN - 1) / TN);
  const int width = GROUP_M * grid_n;
  const int group = pid / width;
  const int first_m = group * GROUP_M;
  const int rows = min(grid_m - first_m, GROUP_M);
  const int rem = pid - group * width;
  tm = first_m + rem % rows;
  tn = rem / rows;
}

// Writes 8 elements of T (v) to C[gr, gc..]: one 16-byte store where `vec` (rows of C 16-byte
// aligned) and all 8 are in range, else element by element up to the right edge N.
__device__ __forceinline__ void store8(T* __restrict__ C, long long N, long long gr, long long gc,
                                       uint4 v, bool vec) {
  if (vec && gc + 8 <= N) {
    *reinterpret_cast<uint4*>(C + gr * N + gc) = v;
    return;
  }
  unsigned short* cs = reinterpret_cast<unsigned short*>(C);
  const u32 w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int e = 0; e < 8; ++e) {
    if (gc + e < N) cs[gr * N + gc + e] = static_cast<unsigned short>(w[e / 2] >> (16 * (e % 2)));
  }
}

// Writes the BM x BN staging tile (T, row pitch SP, at `stage`) to C rows m0.., columns n0..:
// 16-byte chunks, coalesced; guarded at the bottom and right edges.
template <int NTHR>
__device__ __forceinline__ void store_tile(const unsigned char* stage, T* __restrict__ C,
                                           long long M, long long N, long long m0, long long n0,
                                           int tid) {
  constexpr int CPR = BN / 8;
  const bool vec = (N % 8 == 0) && (reinterpret_cast<u64>(C) % 16 == 0);
#pragma unroll 4
  for (int q = tid; q < BM * CPR; q += NTHR) {
    const int r = q / CPR, c = q % CPR;
    const long long gr = m0 + r, gc = n0 + c * 8;
    if (gr >= M || gc >= N) continue;
    store8(C, N, gr, gc, *reinterpret_cast<const uint4*>(stage + (r * SP + c * 8) * 2), vec);
  }
}

// Row pitch alignment: 16-byte cp.async needs K and N multiples of 8 and aligned bases.
__device__ __forceinline__ bool rows_aligned(const T* A, const T* B, long long N, long long K) {
  return (K % 8 == 0) && (N % 8 == 0) && (reinterpret_cast<u64>(A) % 16 == 0) &&
         (reinterpret_cast<u64>(B) % 16 == 0);
}

#if IMPL == 0
// =============================================================================================
// IMPL 0: mma.sync m16n8k16, WM x WN warps, cp.async multistage pipeline.
constexpr int NTHREADS = WM * WN * 32;
constexpr int WTM = BM / WM, WTN = BN / WN;  // warp tile
constexpr int MT = WTM / 16, NT8 = WTN / 8;  // m16 and n8 fragments per warp
constexpr u32 A_BYTES = BM * BK * 2, B_BYTES = BK * BN * 2, STAGE_BYTES = A_BYTES + B_BYTES;
static_assert(WTM % 16 == 0 && WTN % 16 == 0, "warp tile must be a multiple of 16 x 16");

__device__ __forceinline__ void ldsm_x4(u32 (&r)[4], u32 addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void ldsm_x4_trans(u32& r0, u32& r1, u32& r2, u32& r3, u32 addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
               : "r"(addr));
}
// d (16x8 f32) += a (16x16, row) * b (16x8, col)
__device__ __forceinline__ void mma_16816(float (&d)[4], const u32 (&a)[4], u32 b0, u32 b1) {
  if constexpr (kBf16) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}

extern "C" __global__ void __launch_bounds__(NTHREADS)
    matmul(const T* __restrict__ A, const T* __restrict__ B, T* __restrict__ C, float* ws,
           long long M, long long N, long long K) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  const u32 raw = smem_addr(smem_raw);
  const u32 sbase = (raw + 1023u) & ~1023u;  // stage 0; kiln reserves 1 KB of slack for this
  int tm, tn;
  tile_coords(M, N, tm, tn);
  const long long m0 = static_cast<long long>(tm) * BM, n0 = static_cast<long long>(tn) * BN;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int wm = warp / WN, wn = warp % WN;
  const bool aligned = rows_aligned(A, B, N, K);
  const int KT = static_cast<int>((K + BK - 1) / BK);

  // Issues the copies of K slice kt into stage s (asynchronous in modes 0 and 1).
  auto load_stage = [&](int kt, int s) {
    const long long k0 = static_cast<long long>(kt) * BK;
    const u32 sa = sbase + s * STAGE_BYTES, sb = sa + A_BYTES;
    const int mode_a = !aligned ? 2 : (m0 + BM <= M && k0 + BK <= K) ? 0 : 1;
    const int mode_b = !aligned ? 2 : (k0 + BK <= K && n0 + BN <= N) ? 0 : 1;
    load_tile<BM, BK, NTHREADS, true>(sa, A, K, m0, k0, M, K, tid, mode_a);
    load_tile<BK, BN, NTHREADS, false>(sb, B, N, k0, n0, K, N, tid, mode_b);
  };

  // Prologue: slices 0 .. STAGES-2 in flight, one commit group each (empty groups past KT keep
  // the group count, and so wait_group's meaning, the same).
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < KT) load_stage(s, s);
    cp_async_commit();
  }

  float acc[MT][NT8][4];
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int j = 0; j < NT8; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.f;

  for (int kt = 0; kt < KT; ++kt) {
    // Slice kt has landed (at most STAGES-2 younger groups pending) and, after the barrier, is
    // visible to all; every warp is also done with slice kt-1, whose stage is refilled next.
    cp_async_wait<STAGES - 2>();
    __syncthreads();
    {
      const int nk = kt + STAGES - 1;
      if (nk < KT) load_stage(nk, nk % STAGES);
      cp_async_commit();
    }
    const u32 sa = sbase + (kt % STAGES) * STAGE_BYTES, sb = sa + A_BYTES;
#pragma unroll
    for (int kk = 0; kk < BK / 16; ++kk) {
      u32 af[MT][4], bf[NT8][2];
      // A: ldmatrix.x4 at rows (lane & 15), k chunk 2kk + lane/16 -> a0..a3 of one m16 fragment.
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        ldsm_x4(af[mt], sa + a_off(wm * WTM + mt * 16 + (lane & 15), kk * 2 + (lane >> 4)));
      }
      // B: ldmatrix.x4.trans at k rows 16kk + (lane & 15), n chunk (16 columns per pair) + lane/16
      // -> b0, b1 of two n8 fragments.
#pragma unroll
      for (int np = 0; np < NT8 / 2; ++np) {
        ldsm_x4_trans(bf[2 * np][0], bf[2 * np][1], bf[2 * np + 1][0], bf[2 * np + 1][1],
                      sb + b_off(kk * 16 + (lane & 15), (wn * WTN + np * 16) / 8 + (lane >> 4)));
      }
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int nt = 0; nt < NT8; ++nt) mma_16816(acc[mt][nt], af[mt], bf[nt][0], bf[nt][1]);
    }
  }
  cp_async_wait<0>();
  __syncthreads();  // the pipeline's shared memory is free: reuse it for the staging tile

  unsigned char* stage = smem_raw + (sbase - raw);
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
    for (int nt = 0; nt < NT8; ++nt) {
      const int r = wm * WTM + mt * 16 + (lane >> 2), c = wn * WTN + nt * 8 + 2 * (lane & 3);
      *reinterpret_cast<u32*>(stage + (r * SP + c) * 2) = pack2(acc[mt][nt][0], acc[mt][nt][1]);
      *reinterpret_cast<u32*>(stage + ((r + 8) * SP + c) * 2) =
          pack2(acc[mt][nt][2], acc[mt][nt][3]);
    }
  }
  __syncthreads();
  store_tile<NTHREADS>(stage, C, M, N, m0, n0, tid);
}

#elif IMPL == 1
// =============================================================================================
// IMPL 1: wgmma, 2 consumer warpgroups + 1 producer warpgroup, mbarrier ring of STAGES stages.
// Registers: one block per SM, so ptxas may use up to 168 per thread (384 threads); a consumer
// needs its MW * BN / 2 accumulators (at most 128) plus ~30 (ptxas reports ~154, no spills).
constexpr int CONSUMERS = 2;           // consumer warpgroups: warps 0..7
constexpr int PRODUCER_THREADS = 128;  // producer warpgroup: warps 8..11
constexpr int NTHREADS = CONSUMERS * 128 + PRODUCER_THREADS;
constexpr bool PING = PERS == 3;                        // ping-pong: a warpgroup owns whole tiles
constexpr int MW = BM / (64 * (PING ? 1 : CONSUMERS));  // m64 blocks per consumer
constexpr int WG_ROWS = PING ? 0 : MW;  // a warpgroup's first m64 block: wg * WG_ROWS
constexpr int EMPTY_WARPS = PING ? 4 : CONSUMERS * 4;  // consumer warps that read each stage
constexpr int NACC = BN / 2;               // f32 accumulators per m64 block
constexpr u32 A_BYTES = BM * 128, B_BYTES = 64 * BN * 2, STAGE_BYTES = A_BYTES + B_BYTES;
constexpr u32 STAGING_BYTES = BM * SP * 2;
constexpr u32 RING_BYTES = STAGES * STAGE_BYTES;
// Split-K: the f32 partial tile, rows of PART_PITCH floats (+8: the fragment stores of a
// half-warp, 4 rows x 8 columns, fall in 32 different banks).
constexpr u32 PART_PITCH = BN + 8;
constexpr u32 PART_BYTES = SK > 1 ? BM* PART_PITCH * 4 : 0;
constexpr u32 max3(u32 a, u32 b, u32 c) { return a > b ? (a > c ? a : c) : (b > c ? b : c); }
constexpr u32 BAR_OFF = max3(RING_BYTES, STAGING_BYTES, PART_BYTES);  // mbarriers
static_assert(BK == 64, "the wgmma variant uses 64-element (128-byte) K slices");
static_assert(MW >= 1 && BM % (64 * (PING ? 1 : CONSUMERS)) == 0,
              "BM is a multiple of 128 (ping-pong: of 64)");
static_assert(MW * NACC <= 128, "at most 128 accumulators per consumer thread");
static_assert(BN == 128 || BN == 192 || BN == 256, "wgmma N is 128, 192 or 256 here");
// Clusters: 3 producer warps load, the 4th sends this CTA's half of the shared operand (B for
// CL 1: BN/2 columns = BN/128 column blocks; A for CL 2: BM/2 rows) to the peer CTA.
constexpr int LOADERS = 96;
constexpr u32 HALF_BYTES = CL == 1 ? B_BYTES / 2 : A_BYTES / 2;
static_assert(CL == 0 || CL == 1 || CL == 2, "CL is 0 (no cluster), 1 (share B) or 2 (share A)");
static_assert(CL != 1 || BN % 128 == 0, "B halves are whole 64-column blocks");
static_assert(SK >= 1 && SK <= 8, "SK is 1 to 8 (a portable cluster)");
static_assert(SK == 1 || (CL == 0 && PERS == 0), "split-K has a cluster of its own, one tile");
static_assert((PERS != 2 && PERS != 4) || (TMA == 1 && CL == 0),
              "PERS 2 / 4 store with TMA from single CTAs");
static_assert(PERS != 3 || TMA == 1, "PERS 3 stores with TMA");
static_assert(PERS >= 0 && PERS <= 4, "PERS is 0 to 4");
constexpr bool TAIL = PERS == 4;         // stream-K for the last partial wave
constexpr long long SLOT_OFF = 1024;     // PERS 4: the partial-tile slots' first word in ws
// PERS 2 / 3: two 8 KB epilogue buffers (64 x 64 elements) per consumer warpgroup, after the
// barriers.
constexpr u32 EPI_OFF = (BAR_OFF + 256 + 1023) & ~1023u;
constexpr u32 EPI_BUF = 64 * 128;

// clang-format off
#define WG_REGS64 \
  "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, " \
  "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
  "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
#define WG_REGS96 WG_REGS64 ", " \
  "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, " \
  "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95"
#define WG_REGS128 WG_REGS96 ", " \
  "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, " \
  "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
// The 64 accumulators d[o] .. d[o + 63] as read-write asm operands.
#define WG_ACC8(d, o) "+f"(d[o]), "+f"(d[o + 1]), "+f"(d[o + 2]), "+f"(d[o + 3]), \
  "+f"(d[o + 4]), "+f"(d[o + 5]), "+f"(d[o + 6]), "+f"(d[o + 7])
#define WG_ACC32(d, o) WG_ACC8(d, o), WG_ACC8(d, o + 8), WG_ACC8(d, o + 16), WG_ACC8(d, o + 24)
#define WG_ACC64(d, o) WG_ACC32(d, o), WG_ACC32(d, o + 32)
// wgmma m64nBNk16: d += A (64x16 from descriptor da, K-major) * B (16xBN from db, N-major:
// imm-trans-b = 1); scale-d = 1 (accumulate), no negation.
#if BN == 256
#define WG_MMA(TY)                                                                             \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"                                   \
               "wgmma.mma_async.sync.aligned.m64n256k16.f32." TY "." TY " {" WG_REGS128 "}, " \
               "%128, %129, p, 1, 1, 0, 1;\n}\n"                                               \
               : WG_ACC64(d, 0), WG_ACC64(d, 64)                                               \
               : "l"(da), "l"(db), "r"(1))
#elif BN == 192
#define WG_MMA(TY)                                                                            \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %98, 0;\n"                                   \
               "wgmma.mma_async.sync.aligned.m64n192k16.f32." TY "." TY " {" WG_REGS96 "}, " \
               "%96, %97, p, 1, 1, 0, 1;\n}\n"                                               \
               : WG_ACC64(d, 0), WG_ACC32(d, 64)                                              \
               : "l"(da), "l"(db), "r"(1))
#else
#define WG_MMA(TY)                                                                             \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"                                    \
               "wgmma.mma_async.sync.aligned.m64n128k16.f32." TY "." TY " {" WG_REGS64 "}, "  \
               "%64, %65, p, 1, 1, 0, 1;\n}\n"                                                 \
               : WG_ACC64(d, 0)                                                                \
               : "l"(da), "l"(db), "r"(1))
#endif
// clang-format on
__device__ __forceinline__ void wgmma_tile(float (&d)[NACC], u64 da, u64 db) {
  if constexpr (kBf16)
    WG_MMA("bf16");
  else
    WG_MMA("f16");
}
// Keeps the compiler from moving accumulator reads/writes across the asynchronous wgmma.
__device__ __forceinline__ void fence_acc(float (&d)[NACC]) {
#pragma unroll
  for (int i = 0; i < NACC; ++i) asm volatile("" : "+f"(d[i])::"memory");
}
// Shared-memory matrix descriptor, 128-byte swizzle (layout type 1 in bits 62-63).
__device__ __forceinline__ u64 smem_desc(u32 addr, u32 lbo, u32 sbo) {
  return static_cast<u64>((addr & 0x3FFFFu) >> 4) | (static_cast<u64>((lbo >> 4) & 0x3FFFu) << 16) |
         (static_cast<u64>((sbo >> 4) & 0x3FFFu) << 32) | (1ull << 62);
}
__device__ __forceinline__ void mbar_init(u32 bar, u32 count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_arrive(u32 bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
// Arrives on bar once all of this thread's earlier cp.async have completed (counts as one of
// the barrier's expected arrivals: .noinc).
__device__ __forceinline__ void mbar_arrive_cp_async(u32 bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void consumer_sync() {
  asm volatile("bar.sync 1, %0;\n" ::"n"(CONSUMERS * 128) : "memory");
}
__device__ __forceinline__ void mbar_wait(u32 bar, u32 parity) {
  u32 done;
  do {
    asm volatile(
        "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        "selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
  } while (!done);
}

// ---- 2-CTA clusters (CL 1 and 2): PTX for distributed shared memory.
// The address of the same shared-memory byte in CTA `rank` of the cluster (shared::cluster window).
__device__ __forceinline__ u32 peer_addr(u32 addr, u32 rank) {
  u32 r;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(r) : "r"(addr), "r"(rank));
  return r;
}
__device__ __forceinline__ u32 cluster_rank() {
  u32 r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
  return r;
}
// Arrive on an mbarrier of another CTA of the cluster. A consumer arrives to say that its wgmma
// have read a stage (they completed: wgmma.wait_group); what waits on it is the peer's next TMA
// or bulk copy into that stage, an async-proxy write. No generic memory operation of this thread
// has to become visible to the peer first, so the arrive has the default CTA-scope release: with
// .release.cluster instead, every remote arrive waited for cluster-wide visibility and 4096^3
// ran 1.65x slower (H100, 198 against 322 us).
__device__ __forceinline__ void mbar_arrive_remote(u32 bar_cluster) {
  asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];\n" ::"r"(bar_cluster) : "memory");
}
// Arrive on a local mbarrier and raise its expected transaction count by `bytes`.
__device__ __forceinline__ void mbar_arrive_expect_tx(u32 bar, u32 bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes)
               : "memory");
}
// Bulk copy (async proxy, the TMA engine) of `bytes` from this CTA's shared memory to another
// CTA's; completes `bytes` transactions on that CTA's mbarrier (both as shared::cluster addresses).
__device__ __forceinline__ void bulk_copy_to_peer(u32 dst_cluster, u32 src, u32 bytes,
                                                  u32 bar_cluster) {
  asm volatile(
      "cp.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes [%0], [%1], %2, "
      "[%3];\n" ::"r"(dst_cluster),
      "r"(src), "r"(bytes), "r"(bar_cluster)
      : "memory");
}
// Barrier over every thread of the cluster (release / acquire).
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive;\nbarrier.cluster.wait;\n" ::: "memory");
}
// Four floats from a shared::cluster address (another CTA's shared memory, or this one's).
__device__ __forceinline__ float4 ld_cluster_f4(u32 addr) {
  float4 v;
  asm volatile("ld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [%4];\n"
               : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
               : "r"(addr)
               : "memory");
  return v;
}

// TMA: the box of `map` at coordinates (c0 innermost, c1) into shared memory at `dst`, completing
// its bytes on the mbarrier `bar` (the map is a __grid_constant__ parameter: its generic address).
__device__ __forceinline__ void tma_load_2d(u32 dst, const kiln_tensor_map& map, int c0, int c1,
                                            u32 bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, "
      "{%2, %3}], [%4];\n" ::"r"(dst),
      "l"(reinterpret_cast<u64>(&map)), "r"(c0), "r"(c1), "r"(bar)
      : "memory");
}
// The same box into shared memory at `dst` of every CTA of the cluster in `mask` (bit = rank),
// completing its bytes on the mbarrier at offset `bar` of each of them.
__device__ __forceinline__ void tma_load_2d_multicast(u32 dst, const kiln_tensor_map& map, int c0,
                                                      int c1, u32 bar, unsigned short mask) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::"
      "cluster [%0], [%1, {%2, %3}], [%4], %5;\n" ::"r"(dst),
      "l"(reinterpret_cast<u64>(&map)), "r"(c0), "r"(c1), "r"(bar), "h"(mask)
      : "memory");
}

// TMA store of the box of `map` at coordinates (c0 innermost, c1) from shared memory at `src`,
// in this thread's bulk group; elements outside the tensor are not written.
__device__ __forceinline__ void tma_store_2d(const kiln_tensor_map& map, int c0, int c1, u32 src) {
  asm volatile(
      "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];\n" ::"l"(
          reinterpret_cast<u64>(&map)),
      "r"(c0), "r"(c1), "r"(src)
      : "memory");
  asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
}
// Waits until at most N of this thread's bulk groups still read shared memory.
template <int N>
__device__ __forceinline__ void tma_store_wait_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(N) : "memory");
}
// Named barrier over the 128 threads of consumer warpgroup wg (ids 2 and 3; 1 is consumer_sync).
__device__ __forceinline__ void warpgroup_sync(int wg) {
  asm volatile("bar.sync %0, 128;\n" ::"r"(2 + wg) : "memory");
}
// PERS 3: barrier 4 + wg is "warpgroup wg's turn on the tensor cores". The other warpgroup arrives
// on it once it has issued a tile's last wgmma; warpgroup wg waits on it before its next tile.
__device__ __forceinline__ void turn_wait(int wg) {
  asm volatile("bar.sync %0, 256;\n" ::"r"(4 + wg) : "memory");
}
__device__ __forceinline__ void turn_pass(int wg) {
  asm volatile("bar.arrive %0, 256;\n" ::"r"(4 + (wg ^ 1)) : "memory");
}

// PERS 2: consumer warpgroup wg's rows of the tile at (m0, n0) leave through its two buffers at
// `epi` + wg * 2 * EPI_BUF, a 64 x 64 block at a time: fragment (row r, chunk c) at
// r * 128 + (c ^ (r & 7)) * 16, the 128-byte swizzle the map c_tiles reads. One thread (warp 0
// of the warpgroup, lane 0) waits for the buffers and issues the stores.
__device__ __forceinline__ void store_tile_tma(float (&acc)[MW][NACC], int wg, int wq, int lane,
                                               long long m0, long long n0,
                                               const kiln_tensor_map& map, u32 epi) {
  const bool leader = wq == 0 && lane == 0;
  const u32 bufs = epi + wg * 2 * EPI_BUF;
  int n = 0;
#pragma unroll
  for (int mb = 0; mb < MW; ++mb) {
#pragma unroll
    for (int blk = 0; blk < BN / 64; ++blk, ++n) {
      const u32 buf = bufs + (n & 1) * EPI_BUF;
      if (leader) tma_store_wait_read<1>();  // the store before last has read this buffer
      warpgroup_sync(wg);
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int r = wq * 16 + (lane >> 2) + 8 * h;
#pragma unroll
        for (int c = 0; c < 8; ++c) {
          const int j = blk * 8 + c;
          const u32 at = buf + r * 128 + ((c ^ (r & 7)) << 4) + 4 * (lane & 3);
          asm volatile("st.shared.u32 [%0], %1;\n" ::"r"(at),
                       "r"(pack2(acc[mb][4 * j + 2 * h], acc[mb][4 * j + 2 * h + 1]))
                       : "memory");
        }
      }
      // The generic-proxy writes before the TMA engine's (async-proxy) read of the buffer.
      asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
      warpgroup_sync(wg);
      if (leader)
        tma_store_2d(map, static_cast<int>(n0) + 64 * blk,
                     static_cast<int>(m0) + (wg * WG_ROWS + mb) * 64, buf);
    }
  }
}

// PERS 4: this thread's accumulators to and from slot `slot` of ws (consumer warpgroup wg's
// half of it): float4 j of thread t at (j * 128 + t) * 16 bytes, so that each warp instruction
// moves 512 contiguous bytes. Through L2 only (.cg): the slot is written and read by two SMs.
__device__ __forceinline__ float4* slot_of(float* ws, int slot, int wg) {
  return reinterpret_cast<float4*>(ws + SLOT_OFF + static_cast<long long>(slot) * BM * BN +
                                   wg * (MW * NACC * 128));
}
__device__ __forceinline__ void put_partial(const float (&acc)[MW][NACC], float* ws, int slot,
                                            int wg, int t) {
  float4* p = slot_of(ws, slot, wg);
#pragma unroll
  for (int mb = 0; mb < MW; ++mb) {
#pragma unroll
    for (int j = 0; j < NACC / 4; ++j)
      __stcg(
          p + (mb * (NACC / 4) + j) * 128 + t,
          make_float4(acc[mb][4 * j], acc[mb][4 * j + 1], acc[mb][4 * j + 2], acc[mb][4 * j + 3]));
  }
}
__device__ __forceinline__ void add_partial(float (&acc)[MW][NACC], float* ws, int slot, int wg,
                                            int t) {
  const float4* p = slot_of(ws, slot, wg);
#pragma unroll
  for (int mb = 0; mb < MW; ++mb) {
#pragma unroll
    for (int j = 0; j < NACC / 4; ++j) {
      const float4 v = __ldcg(p + (mb * (NACC / 4) + j) * 128 + t);
      acc[mb][4 * j] += v.x, acc[mb][4 * j + 1] += v.y;
      acc[mb][4 * j + 2] += v.z, acc[mb][4 * j + 3] += v.w;
    }
  }
}
// PERS 4: a partial's flag, set with release semantics once the partial is written; its reader
// waits for it with acquire semantics and clears it for the next launch.
__device__ __forceinline__ void flag_set(int* f) {
  asm volatile("st.release.gpu.global.b32 [%0], %1;\n" ::"l"(f), "r"(1) : "memory");
}
__device__ __forceinline__ void flag_take(int* f) {
  int v;
  do {
    asm volatile("ld.acquire.gpu.global.b32 %0, [%1];\n" : "=r"(v) : "l"(f) : "memory");
  } while (v == 0);
  asm volatile("st.relaxed.gpu.global.b32 [%0], %1;\n" ::"l"(f), "r"(0) : "memory");
}

// Split-K: CTA `rank` sums rows [rank * ROWS, +ROWS) (ROWS = BM / SK rounded up; the last rank
// fewer) of the SK partial tiles (f32, pitch
// PART_PITCH, at shared address `part` in every CTA of the cluster) in rank order and writes them
// to C as T, 8 columns per thread and step.
__device__ __forceinline__ void reduce_partials(u32 part, u32 rank, T* __restrict__ C, long long M,
                                                long long N, long long m0, long long n0, int tid) {
  constexpr int ROWS = (BM + SK - 1) / SK, CPR = BN / 8;
  const bool vec = (N % 8 == 0) && (reinterpret_cast<u64>(C) % 16 == 0);
  for (int q = tid; q < ROWS * CPR; q += NTHREADS) {
    const int r = static_cast<int>(rank) * ROWS + q / CPR, c = (q % CPR) * 8;
    const long long gr = m0 + r, gc = n0 + c;
    if ((BM % SK != 0 && r >= BM) || gr >= M || gc >= N) continue;
    const u32 at = part + (r * PART_PITCH + c) * 4;
    float v[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
#pragma unroll
    for (u32 p = 0; p < SK; ++p) {
      const u32 from = peer_addr(at, p);
      const float4 x = ld_cluster_f4(from), y = ld_cluster_f4(from + 16);
      v[0] += x.x, v[1] += x.y, v[2] += x.z, v[3] += x.w;
      v[4] += y.x, v[5] += y.y, v[6] += y.z, v[7] += y.w;
    }
    store8(C, N, gr, gc,
           make_uint4(pack2(v[0], v[1]), pack2(v[2], v[3]), pack2(v[4], v[5]), pack2(v[6], v[7])),
           vec);
  }
}

#if CL != 0
#define KILN_CLUSTER_DIMS __cluster_dims__(2, 1, 1)
#elif SK > 1
#define KILN_CLUSTER_DIMS __cluster_dims__(SK, 1, 1)
#else
#define KILN_CLUSTER_DIMS
#endif

#if TMA && PERS >= 2
#define KILN_TMA_PARAMS                                \
  , const __grid_constant__ kiln_tensor_map a_tiles,   \
      const __grid_constant__ kiln_tensor_map b_tiles, \
      const __grid_constant__ kiln_tensor_map c_tiles
#elif TMA
#define KILN_TMA_PARAMS \
  , const __grid_constant__ kiln_tensor_map a_tiles, const __grid_constant__ kiln_tensor_map b_tiles
#else
#define KILN_TMA_PARAMS
#endif

extern "C" __global__ void KILN_CLUSTER_DIMS __launch_bounds__(NTHREADS, 1)
    matmul(const T* __restrict__ A, const T* __restrict__ B, T* __restrict__ C,
           float* __restrict__ ws, long long M, long long N, long long K KILN_TMA_PARAMS) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  const u32 raw = smem_addr(smem_raw);
  // Stage 0, 1024-byte aligned for the swizzle. The dynamic shared memory starts at the same
  // offset in every CTA, so a stage's offset is the same in the peer CTA of a cluster.
  const u32 sbase = (raw + 1023u) & ~1023u;
  const u32 full_bar = sbase + BAR_OFF, empty_bar = full_bar + 8 * STAGES,
            half_bar = empty_bar + 8 * STAGES;
  // Work units: a tile (CL 0) or a cluster's pair of tiles (a 2BM x BN tile for CL 1, BM x 2BN
  // for CL 2, of which CTA `rank` takes the upper/left or lower/right half). PERS 0: unit
  // blockIdx.x (/ 2); PERS 1: units unit0, unit0 + stride, ... (persistent CTAs).
  constexpr int TM = CL == 1 ? 2 * BM : BM, TN = CL == 2 ? 2 * BN : BN;
  auto tile_origin = [&](int u, long long& m0_, long long& n0_) {
    int tm_, tn_;
    tile_coords<TM, TN>(M, N, tm_, tn_, u);
    if constexpr (CL == 1) tm_ = 2 * tm_ + static_cast<int>(cluster_rank());
    if constexpr (CL == 2) tn_ = 2 * tn_ + static_cast<int>(cluster_rank());
    m0_ = static_cast<long long>(tm_) * BM;
    n0_ = static_cast<long long>(tn_) * BN;
  };
  const int unit0 = static_cast<int>(blockIdx.x) / (CL != 0 ? 2 : SK);
  long long m0_top = 0, n0_top = 0;  // PERS 0: this CTA's only tile
  if constexpr (PERS == 0) tile_origin(unit0, m0_top, n0_top);
  // Origin of unit u's tile (PERS 0: the one computed above).
  auto origin = [&](int u, long long& m0_, long long& n0_) {
    if constexpr (PERS == 0) {
      m0_ = m0_top;
      n0_ = n0_top;
    } else {
      tile_origin(u, m0_, n0_);
    }
  };
  // This CTA's K slices of a unit: KTL slices from kb (split-K: its share; otherwise all KT).
  const int KT = static_cast<int>((K + BK - 1) / BK);
  const int kb = SK == 1 ? 0 : static_cast<int>(cluster_rank()) * KT / SK;
  const int KTL = SK == 1 ? KT : (static_cast<int>(cluster_rank()) + 1) * KT / SK - kb;
  // PERS 4: units [0, dp_units) are shared out whole, the K slices of the others (sk_slices in
  // all) in G contiguous ranges; dp_units = units where every tile is shared out whole.
  const int units = static_cast<int>(((M + TM - 1) / TM) * ((N + TN - 1) / TN));
  const int stride = CL == 0 ? static_cast<int>(gridDim.x) : static_cast<int>(gridDim.x / 2);
  int dp_units = units;
  long long sk_slices = 0;
  if constexpr (TAIL) {
    const int rest = units % stride;
    if (rest != 0 && KT > 0 && SLOT_OFF + static_cast<long long>(stride) * BM * BN <= M * N) {
      dp_units = units - rest;
      sk_slices = static_cast<long long>(rest) * KT;
    }
  }
  auto sk_begin = [&](int c) { return static_cast<int>(c * sk_slices / stride); };
  // Calls body(u, k_begin, k_end, g0) for each work item of this CTA: unit u's K slices
  // [k_begin, k_end) (split-K: this CTA's share; PERS 4: a piece of a tail tile; otherwise all
  // KT); g0 = the K slices of its earlier items (the ring's stages and barrier phases run on).
  auto for_work = [&](auto&& body) {
    if constexpr (PERS == 0) {
      body(unit0, kb, kb + KTL, 0);
    } else {
      int g0 = 0;
      for (int u = unit0; u < dp_units; u += stride, g0 += KT) body(u, 0, KT, g0);
      if constexpr (TAIL) {
        const int s1 = sk_begin(unit0 + 1);
        for (int s = sk_begin(unit0); s < s1;) {
          const int kbeg = s % KT, kend = min(KT, kbeg + (s1 - s));
          body(dp_units + s / KT, kbeg, kend, g0);
          g0 += kend - kbeg;
          s += kend - kbeg;
        }
      }
    }
  };
  const u32 rank = CL == 0 && SK == 1 ? 0u : cluster_rank();
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const bool aligned = rows_aligned(A, B, N, K);
  const bool tma = TMA && aligned;  // rows 16-byte aligned: kiln encoded the maps
  // PERS 2: C's map too (N % 8 == 0 is part of `aligned`; C's base must be 16-byte aligned).
  const bool tma_store = PERS >= 2 && tma && reinterpret_cast<u64>(C) % 16 == 0;

  if (tid == 0) {
    for (int s = 0; s < STAGES; ++s) {
      // full: one arrival per loader thread (+ the expect-tx arrival of the peer's half)
      mbar_init(full_bar + 8 * s, tma ? 1 : CL == 0 ? PRODUCER_THREADS : LOADERS + 1);
      // empty: one arrival per consumer warp (of both CTAs of a cluster)
      mbar_init(empty_bar + 8 * s, EMPTY_WARPS * (CL == 0 ? 1 : 2));
      if (CL != 0) mbar_init(half_bar + 8 * s, LOADERS);  // this CTA's shared half has landed
    }
    if (CL != 0) asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  if constexpr (CL == 0)
    __syncthreads();
  else
    cluster_sync();  // the peer's barriers are initialised before anyone touches them

  if (warp >= CONSUMERS * 4) {
    const int ptid = tid - CONSUMERS * 128;
    if (tma) {
#if TMA
      // ---- one producer thread: each stage as TMA boxes, A (k, m) then B's 64-column blocks;
      // with clusters this CTA's half of the shared operand goes to both CTAs (multicast).
      if (ptid == 0) {
        for_work([&](int u, int kbeg, int kend, int g0) {
          long long m0, n0;
          origin(u, m0, n0);
          const int m = static_cast<int>(m0), n = static_cast<int>(n0);
          for (int i = 0; i < kend - kbeg; ++i) {
            const int g = g0 + i;
            const int s = g % STAGES;
            // With clusters `empty` also counts the peer's consumers (remote arrivals); a CTA-scope
            // wait suffices, as the next step is a TMA write (see mbar_arrive_remote).
            if (g >= STAGES) mbar_wait(empty_bar + 8 * s, ((g / STAGES) - 1) & 1);
            const int k0 = (kbeg + i) * BK;
            const u32 sa = sbase + s * STAGE_BYTES, sb = sa + A_BYTES, full = full_bar + 8 * s;
            mbar_arrive_expect_tx(full, STAGE_BYTES);
            if constexpr (CL == 2) {  // A's rows [rank * BM/2, +BM/2) to both CTAs
              tma_load_2d_multicast(sa + rank * HALF_BYTES, a_tiles, k0,
                                    m + static_cast<int>(rank) * (BM / 2), full, 3);
            } else {
              tma_load_2d(sa, a_tiles, k0, m, full);
            }
#pragma unroll
            for (int blk = 0; blk < BN / 64; ++blk) {
              const u32 dst = sb + blk * (64 * 128);
              if constexpr (CL == 1) {  // B's column blocks [rank * BN/128, +BN/128) to both
                if (blk / (BN / 128) == static_cast<int>(rank))
                  tma_load_2d_multicast(dst, b_tiles, n + 64 * blk, k0, full, 3);
              } else {
                tma_load_2d(dst, b_tiles, n + 64 * blk, k0, full);
              }
            }
          }
        });
      }
#endif
    } else if constexpr (CL == 0) {
      // ---- producers: fill stage g % STAGES with slice g once its previous use has retired.
      for_work([&](int u, int kbeg, int kend, int g0) {
        long long m0, n0;
        origin(u, m0, n0);
        for (int i = 0; i < kend - kbeg; ++i) {
          const int g = g0 + i;
          const int s = g % STAGES;
          if (g >= STAGES) mbar_wait(empty_bar + 8 * s, ((g / STAGES) - 1) & 1);
          const long long k0 = static_cast<long long>(kbeg + i) * BK;
          const u32 sa = sbase + s * STAGE_BYTES, sb = sa + A_BYTES;
          const int mode_a = !aligned ? 2 : (m0 + BM <= M && k0 + BK <= K) ? 0 : 1;
          const int mode_b = !aligned ? 2 : (k0 + BK <= K && n0 + BN <= N) ? 0 : 1;
          load_tile<BM, BK, PRODUCER_THREADS, true>(sa, A, K, m0, k0, M, K, ptid, mode_a);
          load_tile<BK, BN, PRODUCER_THREADS, false>(sb, B, N, k0, n0, K, N, ptid, mode_b);
          if (aligned) {
            mbar_arrive_cp_async(full_bar + 8 * s);
          } else {
            // Plain st.shared writes: make them visible to the async proxy (wgmma), then arrive.
            asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
            mbar_arrive(full_bar + 8 * s);
          }
        }
      });
      cp_async_wait<0>();
    } else if (ptid < LOADERS) {
      // ---- loaders (3 warps): this CTA's half of the shared operand first (the peer gets a copy
      // of it), then the whole of the other operand. Stage s is reused once the consumers of
      // BOTH CTAs have released it: then this CTA's copy of the slice and the peer's copy of
      // this CTA's half are both dead, and the sender may overwrite the peer's stage too.
      for_work([&](int u, int kbeg, int kend, int g0) {
        long long m0, n0;
        origin(u, m0, n0);
        for (int i = 0; i < kend - kbeg; ++i) {
          const int g = g0 + i;
          const int s = g % STAGES;
          if (g >= STAGES) mbar_wait(empty_bar + 8 * s, ((g / STAGES) - 1) & 1);
          if (ptid == 0) mbar_arrive_expect_tx(full_bar + 8 * s, HALF_BYTES);  // the peer's half
          const long long k0 = static_cast<long long>(kbeg + i) * BK;
          const u32 sa = sbase + s * STAGE_BYTES, sb = sa + A_BYTES;
          if constexpr (CL == 1) {  // share B: this CTA loads columns [rank * BN/2, +BN/2)
            const long long nh = n0 + rank * (BN / 2);
            const int mode_h = !aligned ? 2 : (k0 + BK <= K && nh + BN / 2 <= N) ? 0 : 1;
            load_tile<BK, BN / 2, LOADERS, false>(sb + rank * HALF_BYTES, B, N, k0, nh, K, N,
                                                  ptid, mode_h);
          } else {  // share A: this CTA loads rows [rank * BM/2, +BM/2)
            const long long mh = m0 + rank * (BM / 2);
            const int mode_h = !aligned ? 2 : (mh + BM / 2 <= M && k0 + BK <= K) ? 0 : 1;
            load_tile<BM / 2, BK, LOADERS, true>(sa + rank * HALF_BYTES, A, K, mh, k0, M, K,
                                                 ptid, mode_h);
          }
          if (aligned) {
            mbar_arrive_cp_async(half_bar + 8 * s);
          } else {
            asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
            mbar_arrive(half_bar + 8 * s);
          }
          if constexpr (CL == 1) {
            const int mode_a = !aligned ? 2 : (m0 + BM <= M && k0 + BK <= K) ? 0 : 1;
            load_tile<BM, BK, LOADERS, true>(sa, A, K, m0, k0, M, K, ptid, mode_a);
          } else {
            const int mode_b = !aligned ? 2 : (k0 + BK <= K && n0 + BN <= N) ? 0 : 1;
            load_tile<BK, BN, LOADERS, false>(sb, B, N, k0, n0, K, N, ptid, mode_b);
          }
          if (aligned) {
            mbar_arrive_cp_async(full_bar + 8 * s);
          } else {
            asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
            mbar_arrive(full_bar + 8 * s);
          }
        }
      });
      cp_async_wait<0>();
    } else if (ptid == LOADERS) {
      // ---- sender (one thread): once this CTA's half of slice g has landed, copy it into the
      // same place of the peer's stage (the layout is position-independent within the 1024-byte
      // aligned stage) and complete its bytes on the peer's full barrier.
      const u32 peer = rank ^ 1u;
      const u32 half_off = (CL == 1 ? A_BYTES : 0u) + rank * HALF_BYTES;
      for_work([&](int, int kbeg, int kend, int g0) {
        for (int i = 0; i < kend - kbeg; ++i) {
          const int g = g0 + i;
          const int s = g % STAGES;
          mbar_wait(half_bar + 8 * s, (g / STAGES) & 1);
          // The half was written by cp.async / st.shared (generic proxy); the bulk copy reads it
          // through the async proxy.
          asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
          const u32 src = sbase + s * STAGE_BYTES + half_off;
          bulk_copy_to_peer(peer_addr(src, peer), src, HALF_BYTES,
                            peer_addr(full_bar + 8 * s, peer));
        }
      });
    }
    if constexpr (CL != 0) cluster_sync();  // matches the consumers' one below
  } else {
    // ---- consumers: warpgroup wg owns rows [wg * MW * 64, (wg + 1) * MW * 64) of the tile
    // (PERS 3: all rows of every other tile of the CTA, from its wg-th).
    const int wg = warp / 4, wq = warp % 4;
    int tiles_seen = 0;  // PERS 3: the CTA's tiles so far (both warpgroups')
    int tiles = 0;       // PERS 3: the CTA's tiles in all
    if constexpr (PING) for_work([&](int, int, int, int) { ++tiles; });
    for_work([&](int u, int kbeg, int kend, int g0) {
      const int t = tiles_seen++;
      if constexpr (PING) {
        if ((t & 1) != wg) return;  // the other warpgroup's tile
        if (t > 0) turn_wait(wg);   // the other warpgroup has issued its previous tile's wgmma
      }
      float acc[MW][NACC];
#pragma unroll
      for (int mb = 0; mb < MW; ++mb) {
#pragma unroll
        for (int i = 0; i < NACC; ++i) acc[mb][i] = 0.f;
        fence_acc(acc[mb]);
      }
      for (int i = 0; i < kend - kbeg; ++i) {
        const int g = g0 + i;
        const int s = g % STAGES;
        mbar_wait(full_bar + 8 * s, (g / STAGES) & 1);
        // The cp.async writes (generic proxy) are now visible to this thread; order them before
        // this thread's async-proxy reads (wgmma operands). TMA writes are async-proxy already.
        if (!tma) asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
        asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
        const u32 sa = sbase + s * STAGE_BYTES, sb = sa + A_BYTES;
#pragma unroll
        for (int kk = 0; kk < BK / 16; ++kk) {
          // B: k rows 16kk.. (16 rows x 128 bytes = 2048 bytes further); LBO = 64-column block
          // stride (64 rows x 128 bytes), SBO = 8 rows.
          const u64 db = smem_desc(sb + kk * 2048, 64 * 128, 1024);
#pragma unroll
          for (int mb = 0; mb < MW; ++mb) {
            // A: rows of this m64 block, k elements 16kk.. (32 bytes into each 128-byte row;
            // the hardware applies the swizzle to the address); SBO = 8 rows; LBO unused.
            const u64 da = smem_desc(sa + (wg * WG_ROWS + mb) * (64 * 128) + kk * 32, 16, 1024);
            wgmma_tile(acc[mb], da, db);
          }
        }
        asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
        // Slice g-1's wgmma have retired: hand its stage back to the producers (of both CTAs).
        asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
        if (i > 0 && lane == 0) {
          const u32 ps = 8 * ((g - 1) % STAGES);
          mbar_arrive(empty_bar + ps);
          if (CL != 0) mbar_arrive_remote(peer_addr(empty_bar + ps, cluster_rank() ^ 1u));
        }
      }
      // PERS 3: every wgmma of this tile is issued; the other warpgroup's next tile may start.
      if constexpr (PING)
        if (t + 1 < tiles) turn_pass(wg);
      asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
#pragma unroll
      for (int mb = 0; mb < MW; ++mb) fence_acc(acc[mb]);
      if constexpr (SK > 1) {
        // Split-K: every consumer's wgmma have retired, so the ring is free for this CTA's f32
        // partial tile; the reduction after the role branches reads it.
        consumer_sync();
        float* part = reinterpret_cast<float*>(smem_raw + (sbase - raw));
#pragma unroll
        for (int mb = 0; mb < MW; ++mb) {
          const int r = (wg * MW + mb) * 64 + wq * 16 + (lane >> 2);
#pragma unroll
          for (int j = 0; j < BN / 8; ++j) {
            const int c = j * 8 + 2 * (lane & 3);
            *reinterpret_cast<float2*>(part + r * PART_PITCH + c) =
                make_float2(acc[mb][4 * j], acc[mb][4 * j + 1]);
            *reinterpret_cast<float2*>(part + (r + 8) * PART_PITCH + c) =
                make_float2(acc[mb][4 * j + 2], acc[mb][4 * j + 3]);
          }
        }
      } else if constexpr (PERS == 0) {
        long long m0, n0;
        // Clusters: the peer is done with this CTA's shared memory (its bulk copies into it were
        // consumed, its reads of this CTA's halves completed before it consumed them, its remote
        // arrivals happened) before the ring is reused and before either CTA exits.
        if constexpr (CL != 0) {
          cluster_sync();
          tile_origin(u, m0, n0);  // recomputed here rather than kept live through the loop
        } else {
          origin(u, m0, n0);
        }
        // Every slice consumed (so every copy landed) and every wgmma retired: the ring is free
        // for the staging tile. Named barrier 1 synchronizes the consumer warps only.
        consumer_sync();
        unsigned char* stage = smem_raw + (sbase - raw);
#pragma unroll
        for (int mb = 0; mb < MW; ++mb) {
          const int r = (wg * MW + mb) * 64 + wq * 16 + (lane >> 2);
#pragma unroll
          for (int j = 0; j < BN / 8; ++j) {
            const int c = j * 8 + 2 * (lane & 3);
            *reinterpret_cast<u32*>(stage + (r * SP + c) * 2) =
                pack2(acc[mb][4 * j], acc[mb][4 * j + 1]);
            *reinterpret_cast<u32*>(stage + ((r + 8) * SP + c) * 2) =
                pack2(acc[mb][4 * j + 2], acc[mb][4 * j + 3]);
          }
        }
        consumer_sync();
        store_tile<CONSUMERS * 128>(stage, C, M, N, m0, n0, tid);
      } else {
        // Persistent: release the unit's last slice, then write C straight from the
        // accumulators (the ring is busy with the next unit's slices, which the producers are
        // already loading): 4-byte stores of column pairs, element-wise at a ragged right edge
        // or when rows of C are not 4-byte aligned.
        if (lane == 0) {
          const u32 ps = 8 * ((g0 + (kend - kbeg) - 1) % STAGES);
          mbar_arrive(empty_bar + ps);
          if (CL != 0) mbar_arrive_remote(peer_addr(empty_bar + ps, cluster_rank() ^ 1u));
        }
        if constexpr (TAIL) {
          if (u >= dp_units) {  // a piece of a tail tile (CL 0: this CTA is number unit0)
            const int wt = tid & 127;  // this thread's number in its warpgroup
            int* const flags = reinterpret_cast<int*>(ws);
            if (kbeg != 0) {  // not the tile's first piece: its owner adds it
              put_partial(acc, ws, unit0, wg, wt);
              __threadfence();
              warpgroup_sync(wg);
              if (wt == 0) flag_set(flags + 2 * unit0 + wg);
              return;
            }
            // This CTA owns the tile: add the pieces of the CTAs after it that start inside it,
            // in CTA order (their ranges are empty or begin past this CTA's piece).
            const int tile_end = (u - dp_units + 1) * KT;
            for (int c2 = unit0 + 1; c2 < stride; ++c2) {
              const int b = sk_begin(c2);
              if (b >= tile_end) break;
              if (b == sk_begin(c2 + 1)) continue;  // an empty range
              if (wt == 0) flag_take(flags + 2 * c2 + wg);
              warpgroup_sync(wg);
              add_partial(acc, ws, c2, wg, wt);
            }
          }
        }
        long long m0, n0;
        tile_origin(u, m0, n0);
#if PERS >= 2
        if (tma_store) {
          store_tile_tma(acc, wg, wq, lane, m0, n0, c_tiles, sbase + EPI_OFF);
          return;
        }
#endif
        const bool vec = (N % 2 == 0) && (reinterpret_cast<u64>(C) % 4 == 0);
        unsigned short* cs = reinterpret_cast<unsigned short*>(C);
#pragma unroll
        for (int mb = 0; mb < MW; ++mb) {
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const long long gr = m0 + (wg * WG_ROWS + mb) * 64 + wq * 16 + (lane >> 2) + 8 * h;
            if (gr >= M) continue;
#pragma unroll
            for (int j = 0; j < BN / 8; ++j) {
              const long long gc = n0 + j * 8 + 2 * (lane & 3);
              const u32 v = pack2(acc[mb][4 * j + 2 * h], acc[mb][4 * j + 2 * h + 1]);
              if (vec && gc + 1 < N) {
                *reinterpret_cast<u32*>(C + gr * N + gc) = v;
              } else {
                if (gc < N) cs[gr * N + gc] = static_cast<unsigned short>(v & 0xFFFFu);
                if (gc + 1 < N) cs[gr * N + gc + 1] = static_cast<unsigned short>(v >> 16);
              }
            }
          }
        }
      }
    });
    if constexpr (PERS != 0 && CL != 0) cluster_sync();  // matches the producers' one above
    // PERS 2 / 3: the shared memory stays until the TMA engine has read the last blocks.
    if (PERS >= 2 && tma_store && wq == 0 && lane == 0) tma_store_wait_read<0>();
  }
  if constexpr (SK > 1) {
    // Every thread of the cluster (producers too) takes part: the first barrier publishes all
    // partial tiles, the second keeps this CTA's alive until its peers have read it.
    cluster_sync();
    long long m0, n0;
    origin(unit0, m0, n0);
    reduce_partials(sbase, rank, C, M, N, m0, n0, tid);
    cluster_sync();
  }
}
#else
#error "IMPL is 0 (mma.sync) or 1 (wgmma)"
#endif
