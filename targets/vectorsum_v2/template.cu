// Vector-sum template: y[0] = sum of x[0, N) (f32 in, fp64 accumulation, rounded once to f32).
// A persistent grid (target.json: min(cdiv(N, BLOCK * VEC * UNROLL), 132 * GRID) blocks, so at
// most GRID blocks per SM of an H100 and never more blocks than N, the length of `partials`) walks
// x with a grid stride. Each thread issues UNROLL loads of VEC elements (VEC 4: 16-byte float4
// loads, when x is 16-byte aligned; the N % 4 trailing elements are read by the first threads)
// before adding any of them, and adds every element in fp64 into four accumulators (one per
// vector lane). A shuffle + shared-memory step reduces the block to one fp64 partial, written to
// partials[blockIdx.x]; the last block to finish (an atomic count in count[0], after a
// __threadfence) adds all partials -- strided over its threads, then the same block reduction, an
// order fixed by the grid -- writes y and sets the counter back to 0, so the scratch is left as it
// was found for the next launch. No floating-point atomics: bitwise deterministic.
// HINT 1: ld.global.cs (streaming, evict-first) instead of ld.global.nc.
// __launch_bounds__(BLOCK, GRID): every block of the grid is resident at once (the constraint
// BLOCK * GRID <= 2048 keeps that possible), so there is no second wave.
#ifndef BLOCK
#define BLOCK 512
#endif
#ifndef VEC
#define VEC 4
#endif
#ifndef UNROLL
#define UNROLL 4
#endif
#ifndef GRID
#define GRID 4
#endif
#ifndef HINT
#define HINT 0
#endif

static_assert(sizeof(T) == 4, "vectorsum_v2 is an f32 task");
static_assert(BLOCK % 32 == 0 && BLOCK <= 1024, "BLOCK: whole warps");
static_assert(VEC == 1 || VEC == 4, "VEC is 1 (scalar loads) or 4 (float4 loads)");
constexpr int kWarps = BLOCK / 32;

__device__ __forceinline__ float4 load4(const float4* p) {
#if HINT == 1
  return __ldcs(p);
#else
  return __ldg(p);
#endif
}

__device__ __forceinline__ float load1(const T* p) {
#if HINT == 1
  return to_f32(__ldcs(p));
#else
  return to_f32(__ldg(p));
#endif
}

// Sum of s over the block, valid in thread 0 (a fixed tree: shuffles, then warp 0 over the warp
// sums). Every thread must call it; warp_sums must not be in use by an earlier call.
__device__ __forceinline__ double block_sum(double s, double* warp_sums) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
  if ((threadIdx.x & 31) == 0) warp_sums[threadIdx.x >> 5] = s;
  __syncthreads();
  s = 0;
  if (threadIdx.x < 32) {
    s = threadIdx.x < kWarps ? warp_sums[threadIdx.x] : 0.0;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
  }
  return s;
}

extern "C" __global__ void __launch_bounds__(BLOCK, GRID)
    vectorsum_v2(const T* __restrict__ x, T* __restrict__ y, double* __restrict__ partials,
                 int* __restrict__ count, long long N, long long /*ONE*/) {
  __shared__ double warp_sums[kWarps];
  __shared__ int is_last;
  const long long tid = static_cast<long long>(blockIdx.x) * BLOCK + threadIdx.x;
  const long long stride = static_cast<long long>(gridDim.x) * BLOCK;
  double acc[4] = {0.0, 0.0, 0.0, 0.0};

  long long i = tid;
  long long n = N;  // elements read by the scalar loop below, from index N - n
#if VEC == 4
  if (reinterpret_cast<unsigned long long>(x) % 16 == 0) {
    const float4* xv = reinterpret_cast<const float4*>(x);
    const long long nv = N / 4;
    // Full batches: UNROLL independent 16-byte loads in flight before the first add.
    for (; i + static_cast<long long>(UNROLL - 1) * stride < nv; i += UNROLL * stride) {
      float4 a[UNROLL];
#pragma unroll
      for (int u = 0; u < UNROLL; ++u) a[u] = load4(xv + i + u * stride);
#pragma unroll
      for (int u = 0; u < UNROLL; ++u) {
        acc[0] += static_cast<double>(a[u].x);
        acc[1] += static_cast<double>(a[u].y);
        acc[2] += static_cast<double>(a[u].z);
        acc[3] += static_cast<double>(a[u].w);
      }
    }
    for (; i < nv; i += stride) {  // the last partial batch
      const float4 a = load4(xv + i);
      acc[0] += static_cast<double>(a.x);
      acc[1] += static_cast<double>(a.y);
      acc[2] += static_cast<double>(a.z);
      acc[3] += static_cast<double>(a.w);
    }
    n = N - nv * 4;  // 0 to 3 trailing elements
    i = tid;
  }
#endif
  {
    const T* xs = x + (N - n);
    for (; i + static_cast<long long>(UNROLL - 1) * stride < n; i += UNROLL * stride) {
      float a[UNROLL];
#pragma unroll
      for (int u = 0; u < UNROLL; ++u) a[u] = load1(xs + i + u * stride);
#pragma unroll
      for (int u = 0; u < UNROLL; ++u) acc[u % 4] += static_cast<double>(a[u]);
    }
    for (; i < n; i += stride) acc[0] += static_cast<double>(load1(xs + i));
  }

  const double s = block_sum((acc[0] + acc[1]) + (acc[2] + acc[3]), warp_sums);
  if (threadIdx.x == 0) {
    partials[blockIdx.x] = s;
    __threadfence();  // the partial is visible device-wide before the block is counted
    is_last = atomicAdd(count, 1) == static_cast<int>(gridDim.x) - 1;
  }
  __syncthreads();  // also: warp 0 is done reading warp_sums
  if (!is_last) return;
  __threadfence();  // every block's partial is visible to this one
  double t = 0;
  for (unsigned b = threadIdx.x; b < gridDim.x; b += BLOCK) t += __ldcg(partials + b);
  t = block_sum(t, warp_sums);
  if (threadIdx.x == 0) {
    y[0] = from_f32<T>(static_cast<float>(t));
    *count = 0;  // leave the scratch as it was found
  }
}
