// Inclusive-scan template: y[i] = x[0] + ... + x[i] (f32 in and out, fp64 sums), in ONE pass with
// decoupled look-back. Block k (target.json launches cdiv(N, BLOCK * ITEMS) blocks) scans tile k
// of BLOCK * ITEMS elements:
//  1. The tile is read with coalesced loads (16-byte float4 loads when it is whole and x, y are
//     16-byte aligned, else guarded scalar loads) into shared memory, one pad word per 32 words,
//     so that both the striped writes and the blocked reads below are free of bank conflicts.
//  2. Thread t takes elements [t * ITEMS, (t + 1) * ITEMS) of the tile and sums them in fp64; a
//     shuffle scan per warp and one over the warp totals (warp 0) give every thread the sum of the
//     elements before its own in the tile, and the tile's sum (its aggregate).
//  3. Warp 0 publishes the aggregate in the tile's status word, then looks back: lane l reads the
//     status of tile k - 1 - l until the nearest tile that has published an inclusive prefix is
//     found with every tile between it and k having published at least its aggregate; that
//     prefix plus those aggregates is the sum of every element before the tile. It publishes the
//     tile's inclusive prefix and counts the block as done.
//  4. Each thread adds its prefixes to that carry, in fp64, rounds each once to f32 into shared
//     memory, and the tile is written back with coalesced stores.
// Status words (the scratch `status`, i64[N]: word k for tile k, then the done-counter at word
// `tiles`; with tiles >= 2 a tile has >= 2048 elements, so tiles + 1 <= N): the fp64 value with
// its two lowest mantissa bits replaced by a flag (0 empty, 1 aggregate, 2 inclusive prefix), so
// one 64-bit store publishes value and flag together. Determinism: the carry of tile k is defined
// as E(k) = r(... r(r(A(0)) + A(1)) ... + A(k-1)), r() clearing the two low bits (and making NaNs
// one NaN) and A(j) = r(tile j's aggregate), a left-to-right fold; a tile's inclusive word holds
// E(k + 1) and the look-back folds the aggregates it reads onto the inclusive prefix it found in
// the same order, so the carry is bitwise the same whichever tiles had finished when it looked
// (the 2^-50 relative error of r() is far below f32 rounding). Tiles are taken in blockIdx.x
// order: blocks are dispatched in that order, so every tile a block waits on is resident or done.
// Scratch: the last block to finish (the counter) zeroes the status words and the counter, so the
// buffer is left as kiln hands it over for the next launch. A single tile uses no status at all.
// HINT 1: streaming (evict-first) loads and stores, ld.global.cs / st.global.cs.
#ifndef BLOCK
#define BLOCK 256
#endif
#ifndef ITEMS
#define ITEMS 16
#endif
#ifndef HINT
#define HINT 0
#endif

static_assert(sizeof(T) == 4, "prefixsum_v2 is an f32 task");
static_assert(BLOCK % 32 == 0 && BLOCK <= 1024, "BLOCK: whole warps");
static_assert(ITEMS == 4 || ITEMS == 8 || ITEMS == 16 || ITEMS == 32,
              "ITEMS: a power of two from 4 to 32 (conflict-free padding, whole float4s)");
constexpr int kTile = BLOCK * ITEMS;
constexpr int kWarps = BLOCK / 32;
constexpr unsigned long long kEmpty = 0, kAggregate = 1, kInclusive = 2, kFlags = 3;

// Shared-memory index of tile element i: one pad word after every 32.
__device__ __forceinline__ int padded(int i) { return i + (i >> 5); }

// r(): the value as a status word can hold it (two low mantissa bits cleared, NaNs made one NaN).
__device__ __forceinline__ double status_round(double v) {
  if (v != v) return __longlong_as_double(0x7ff8000000000000LL);
  return __longlong_as_double(__double_as_longlong(v) & ~3LL);
}
__device__ __forceinline__ unsigned long long status_word(double rounded, unsigned long long flag) {
  return static_cast<unsigned long long>(__double_as_longlong(rounded)) | flag;
}
__device__ __forceinline__ double status_value(unsigned long long w) {
  return __longlong_as_double(static_cast<long long>(w & ~kFlags));
}

// Status words are read and written with gpu-scope relaxed 64-bit accesses (never from L1).
__device__ __forceinline__ unsigned long long load_status(const long long* p) {
  unsigned long long w;
  asm volatile("ld.relaxed.gpu.global.b64 %0, [%1];" : "=l"(w) : "l"(p) : "memory");
  return w;
}
__device__ __forceinline__ void store_status(long long* p, unsigned long long w) {
  asm volatile("st.relaxed.gpu.global.b64 [%0], %1;" ::"l"(p), "l"(w) : "memory");
}

__device__ __forceinline__ float4 load4(const float4* p) {
#if HINT == 1
  return __ldcs(p);
#else
  return __ldg(p);
#endif
}
__device__ __forceinline__ void store4(float4* p, float4 v) {
#if HINT == 1
  __stcs(p, v);
#else
  *p = v;
#endif
}

// Warp 0 of tile k >= 1: E(k), the sum of every element before the tile (see the top). Every lane
// returns it.
__device__ __forceinline__ double look_back(const long long* status, long long k) {
  const int lane = threadIdx.x & 31;
  const long long t = k - 1 - lane;  // the predecessor this lane watches
  unsigned long long w = kEmpty;
  unsigned inclusive = 0;
  for (;;) {
    w = t >= 0 ? load_status(status + t) : kEmpty;
    const unsigned flag = static_cast<unsigned>(w & kFlags);
    inclusive = __ballot_sync(0xffffffffu, t >= 0 && flag == kInclusive);
    const unsigned empty = __ballot_sync(0xffffffffu, t >= 0 && flag == kEmpty);
    if (inclusive != 0) {
      const int p = __ffs(inclusive) - 1;         // the nearest tile with an inclusive prefix
      if ((empty & ((1u << p) - 1)) == 0) break;  // every tile after it has its aggregate out
    }
  }
  const int p = __ffs(inclusive) - 1;
  const double v = status_value(w);
  double e = __shfl_sync(0xffffffffu, v, p);
  for (int l = p - 1; l >= 0; --l) e = status_round(e + __shfl_sync(0xffffffffu, v, l));
  return e;
}

extern "C" __global__ void __launch_bounds__(BLOCK)
    prefixsum_v2(const T* __restrict__ x, T* __restrict__ y, long long* __restrict__ status,
                 long long N) {
  __shared__ float tile[kTile + kTile / 32];
  __shared__ double warp_before[kWarps];  // warp totals, then the sum of the warps before each
  __shared__ double carry;                // E(k)
  __shared__ int is_last;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const long long k = blockIdx.x;
  const long long tiles = gridDim.x;
  const long long base = k * kTile;
  const int valid = static_cast<int>(N - base < kTile ? N - base : kTile);
  const bool vec = valid == kTile && reinterpret_cast<unsigned long long>(x) % 16 == 0 &&
                   reinterpret_cast<unsigned long long>(y) % 16 == 0;

  // 1. The tile into shared memory, striped over the threads (coalesced).
  if (vec) {
    const float4* xv = reinterpret_cast<const float4*>(x + base);
#pragma unroll
    for (int j = 0; j < ITEMS / 4; ++j) {
      const int v = threadIdx.x + j * BLOCK;
      const float4 a = load4(xv + v);
      tile[padded(4 * v)] = a.x;
      tile[padded(4 * v + 1)] = a.y;
      tile[padded(4 * v + 2)] = a.z;
      tile[padded(4 * v + 3)] = a.w;
    }
  } else {
#pragma unroll
    for (int j = 0; j < ITEMS; ++j) {
      const int i = threadIdx.x + j * BLOCK;
      tile[padded(i)] = i < valid ? to_f32(x[base + i]) : 0.f;
    }
  }
  __syncthreads();

  // 2. This thread's ITEMS consecutive elements; scans of the thread and warp sums.
  float a[ITEMS];
  double own = 0;
#pragma unroll
  for (int i = 0; i < ITEMS; ++i) {
    a[i] = tile[padded(threadIdx.x * ITEMS + i)];
    own += static_cast<double>(a[i]);
  }
  double inc = own;
#pragma unroll
  for (int d = 1; d < 32; d <<= 1) {
    const double o = __shfl_up_sync(0xffffffffu, inc, d);
    if (lane >= d) inc += o;
  }
  double thread_before = __shfl_up_sync(0xffffffffu, inc, 1);
  if (lane == 0) thread_before = 0;
  if (lane == 31) warp_before[warp] = inc;
  __syncthreads();

  // 3. Warp 0: the tile's aggregate, its status, the look-back.
  if (warp == 0) {
    const double total = lane < kWarps ? warp_before[lane] : 0.0;
    double winc = total;
#pragma unroll
    for (int d = 1; d < 32; d <<= 1) {
      const double o = __shfl_up_sync(0xffffffffu, winc, d);
      if (lane >= d) winc += o;
    }
    double wbefore = __shfl_up_sync(0xffffffffu, winc, 1);
    if (lane == 0) wbefore = 0;
    if (lane < kWarps) warp_before[lane] = wbefore;
    const double aggregate = status_round(__shfl_sync(0xffffffffu, winc, kWarps - 1));
    double e = 0;
    int last = 0;
    if (tiles > 1) {
      if (k > 0) {
        if (lane == 0) store_status(status + k, status_word(aggregate, kAggregate));
        e = look_back(status, k);
      }
      if (lane == 0) store_status(status + k, status_word(status_round(e + aggregate), kInclusive));
      __threadfence();  // this warp's status accesses come before the block is counted
      __syncwarp();
      if (lane == 0) {
        unsigned long long* done = reinterpret_cast<unsigned long long*>(status + tiles);
        last = atomicAdd(done, 1ull) == static_cast<unsigned long long>(tiles - 1);
      }
    }
    if (lane == 0) {
      carry = e;
      is_last = last;
    }
  }
  __syncthreads();

  // 4. The prefixes, rounded once to f32, back into shared memory, then out (coalesced).
  double run = (carry + warp_before[warp]) + thread_before;
#pragma unroll
  for (int i = 0; i < ITEMS; ++i) {
    run += static_cast<double>(a[i]);
    tile[padded(threadIdx.x * ITEMS + i)] = static_cast<float>(run);
  }
  __syncthreads();
  if (vec) {
    float4* yv = reinterpret_cast<float4*>(y + base);
#pragma unroll
    for (int j = 0; j < ITEMS / 4; ++j) {
      const int v = threadIdx.x + j * BLOCK;
      store4(yv + v, make_float4(tile[padded(4 * v)], tile[padded(4 * v + 1)],
                                 tile[padded(4 * v + 2)], tile[padded(4 * v + 3)]));
    }
  } else {
#pragma unroll
    for (int j = 0; j < ITEMS; ++j) {
      const int i = threadIdx.x + j * BLOCK;
      if (i < valid) y[base + i] = from_f32<T>(tile[padded(i)]);
    }
  }

  // The last block out: every other block is past its look-back, so the status words and the
  // counter can be zeroed for the next launch.
  if (is_last) {
    __threadfence();
    for (long long t = threadIdx.x; t <= tiles; t += BLOCK) status[t] = 0;
  }
}
