#!POPCORN leaderboard prefixsum_v2
#!POPCORN gpu H100

# kiln export (gpumode) of prefixsum_v2, f32, cuda sm_90a.
# Kernel: template prefixsum_v2 with BLOCK=512 HINT=1 ITEMS=8
# Written by kiln 0.1.0 (d288aeeff3d9). The verification record is kiln-export.json;
# `kiln verify <this folder>` re-runs the five verification stages and the timing here.
import os

import torch
from torch.utils.cpp_extension import load_inline

from task import input_t, output_t

_CUDA_SRC = r'''#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>

namespace kiln_prefixsum_v2 {

// The element type kiln verified this kernel with (f32).
using T = float;

struct Geometry {
  dim3 grid, block;
  size_t shared_bytes;
};

// Why the kernel cannot run at this shape, or "" when it can: a dim below 1, a constraint of
// the configuration that does not hold, or a launch geometry out of range.
std::string check(long long N);

// The launch geometry at this shape (meaningful when check() is "").
Geometry geometry(long long N);

// Bytes of the scratch buffer `status` at this shape. Zero it once before the first launch;
// the kernel leaves it as it found it, so it can be kept for later launches of any shape
// that fits (one launch at a time).
size_t status_bytes(long long N);

// Launches the kernel on `stream` (asynchronous). Returns cudaErrorInvalidValue without
// launching when check() fails (its message in *why when given), else the launch's error.
cudaError_t launch(const T* x, T* y, long long* status, long long N, cudaStream_t stream = 0, std::string* why = nullptr);

}  // namespace kiln_prefixsum_v2


#include <cmath>
#include <limits>
// Target expressions are evaluated in double, with kiln's cdiv (ceiling), idiv (floor) and pow2.
[[maybe_unused]] static inline double kiln_cdiv(double a, double b) {
  return b == 0 ? std::numeric_limits<double>::quiet_NaN() : std::ceil(a / b);
}
[[maybe_unused]] static inline double kiln_idiv(double a, double b) {
  return b == 0 ? std::numeric_limits<double>::quiet_NaN() : std::floor(a / b);
}
[[maybe_unused]] static inline double kiln_pow2(double x) { return std::exp2(x); }
[[maybe_unused]] static inline double kiln_min(double a, double b) { return a < b ? a : b; }
[[maybe_unused]] static inline double kiln_max(double a, double b) { return a > b ? a : b; }
[[maybe_unused]] static inline double kiln_rint(double x) { return std::floor(x + 0.5); }
[[maybe_unused]] static inline double kiln_sign(double x) { return x > 0 ? 1.0 : (x < 0 ? -1.0 : 0.0); }

// ---- the kernel as kiln verified it: prelude, configuration, source ----
#pragma nv_diag_suppress 177
#define KILN_DTYPE float
#define BLOCK 512
#define HINT 1
#define ITEMS 8
// kiln prelude (cuda)
#include <cuda_fp16.h>
#include <cuda_bf16.h>
typedef KILN_DTYPE T;
static __device__ __forceinline__ float to_f32(float x) { return x; }
static __device__ __forceinline__ float to_f32(__half x) { return __half2float(x); }
static __device__ __forceinline__ float to_f32(__nv_bfloat16 x) { return __bfloat162float(x); }
template <typename U> __device__ __forceinline__ U from_f32(float x);
template <> __device__ __forceinline__ float from_f32<float>(float x) { return x; }
template <> __device__ __forceinline__ __half from_f32<__half>(float x) { return __float2half_rn(x); }
template <> __device__ __forceinline__ __nv_bfloat16 from_f32<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}
#line 1
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
// ---- end of the kernel ----

namespace kiln_prefixsum_v2 {
namespace {

// Every dim as a double, as kiln's expressions see it.
#define KILN_DIM_DOUBLES const double d_N = static_cast<double>(N); (void)d_N;

bool whole(double v, double lo, double hi) { return v == v && v >= lo && v <= hi && v == static_cast<double>(static_cast<long long>(v)); }

std::string shape_text(long long N) {
  return std::string() + "N=" + std::to_string(N);
}

}  // namespace

std::string check(long long N) {
  if (N < 1) return "N is " + std::to_string(N) + ": every dim must be at least 1";
  KILN_DIM_DOUBLES
  if (!(((((((((512) * (8))) >= ((2048.0))) ? 1.0 : 0.0)) != 0.0 && ((((((512) * (8))) <= ((8192.0))) ? 1.0 : 0.0)) != 0.0) ? 1.0 : 0.0) != 0.0)) {
    return "the configuration does not meet its constraint BLOCK * ITEMS >= 2048 && BLOCK * ITEMS <= 8192";
  }
  long long threads = 1;
  if (!whole(kiln_cdiv((d_N), ((512) * (8))), 1, 2147483647.0)) return "grid.x (cdiv(N, BLOCK * ITEMS)) is out of range at " + shape_text(N);
  if (!whole((512), 1, 1024)) return "block.x (BLOCK) is out of range at " + shape_text(N);
  threads *= static_cast<long long>((512));
  if (!whole((1.0), 1, 2147483647.0)) return "grid.y (1) is out of range at " + shape_text(N);
  if (!whole((1.0), 1, 1024)) return "block.y (1) is out of range at " + shape_text(N);
  threads *= static_cast<long long>((1.0));
  if (!whole((1.0), 1, 2147483647.0)) return "grid.z (1) is out of range at " + shape_text(N);
  if (!whole((1.0), 1, 1024)) return "block.z (1) is out of range at " + shape_text(N);
  threads *= static_cast<long long>((1.0));
  if (threads > 1024) return "the block has " + std::to_string(threads) + " threads (at most 1024) at " + shape_text(N);
  int device = 0, optin = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device) != cudaSuccess) {
    optin = 232448;  // no device to ask: Hopper's limit
  }
  const double smem = (0.0);
  if (!whole(smem, 0, static_cast<double>(optin))) {
    return "the kernel needs " + std::to_string(static_cast<long long>(smem)) + " bytes of shared memory at " +
           shape_text(N) + "; this GPU gives a block at most " + std::to_string(optin);
  }
  return "";
}

Geometry geometry(long long N) {
  KILN_DIM_DOUBLES
  Geometry g;
  g.grid.x = static_cast<unsigned>(kiln_cdiv((d_N), ((512) * (8))));
  g.block.x = static_cast<unsigned>((512));
  g.grid.y = static_cast<unsigned>((1.0));
  g.block.y = static_cast<unsigned>((1.0));
  g.grid.z = static_cast<unsigned>((1.0));
  g.block.z = static_cast<unsigned>((1.0));
  g.shared_bytes = static_cast<size_t>((0.0));
  return g;
}

size_t status_bytes(long long N) {
  return sizeof(long long) * static_cast<size_t>(N);
}

cudaError_t launch(const T* x, T* y, long long* status, long long N, cudaStream_t stream, std::string* why) {
  const std::string problem = check(N);
  if (!problem.empty()) {
    if (why) *why = problem;
    return cudaErrorInvalidValue;
  }
  const Geometry g = geometry(N);
  if (g.shared_bytes > 48 * 1024) {
    const cudaError_t e = cudaFuncSetAttribute(::prefixsum_v2, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(g.shared_bytes));
    if (e != cudaSuccess) return e;
  }
  ::prefixsum_v2<<<g.grid, g.block, g.shared_bytes, stream>>>(x, y, status, N);
  return cudaGetLastError();
}

}  // namespace kiln_prefixsum_v2

// Called by the Python wrapper, which has checked dtypes, shapes, devices and contiguity.
void kiln_launch(torch::Tensor x, torch::Tensor y, torch::Tensor status, int64_t N) {
  std::string why;
  const at::cuda::OptionalCUDAGuard guard(x.device());
  const cudaError_t e = kiln_prefixsum_v2::launch(reinterpret_cast<const kiln_prefixsum_v2::T*>(x.data_ptr()), reinterpret_cast<kiln_prefixsum_v2::T*>(y.data_ptr()), reinterpret_cast<long long*>(status.data_ptr()), N, at::cuda::getCurrentCUDAStream(), &why);
  TORCH_CHECK(e == cudaSuccess, "kiln prefixsum_v2: ", why.empty() ? cudaGetErrorString(e) : why);
}
'''

_CPP_SRC = "void kiln_launch(torch::Tensor x, torch::Tensor y, torch::Tensor status, int64_t N);"

os.environ.setdefault("TORCH_CUDA_ARCH_LIST", "9.0a")
_EXT = load_inline(name="kiln_prefixsum_v2_f32_direct", cpp_sources=[_CPP_SRC], cuda_sources=[_CUDA_SRC],
                   functions=["kiln_launch"], extra_cflags=["-O3", "-std=c++17"],
                   extra_cuda_cflags=["-O3", "-std=c++17"])

_SCRATCH = {}


def _check(name, t, dtype, dim_names, dims, device):
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"prefixsum_v2: {name} must be a torch.Tensor, not {type(t).__name__}")
    if t.dtype != dtype:
        raise TypeError(f"prefixsum_v2: {name} is {t.dtype}; this kernel was exported for {dtype} "
                        f"(export another dtype with kiln export --dtype)")
    if t.device.type != "cuda":
        raise ValueError(f"prefixsum_v2: {name} is on {t.device}; this kernel runs on cuda")
    if device is not None and t.device != device:
        raise ValueError(f"prefixsum_v2: {name} is on {t.device}, the other tensors on {device}")
    if t.dim() != len(dim_names):
        raise ValueError(f"prefixsum_v2: {name} has {t.dim()} dims, expected {len(dim_names)} "
                         f"[{', '.join(dim_names)}]")
    if not t.is_contiguous():
        raise ValueError(f"prefixsum_v2: {name} must be contiguous (call .contiguous())")
    for i, d in enumerate(dim_names):
        if d in dims and dims[d] != t.shape[i]:
            raise ValueError(f"prefixsum_v2: {name}.shape[{i}] is {t.shape[i]} but {d} is {dims[d]} "
                             "from the tensors before it")
        dims[d] = int(t.shape[i])
    return t.device


def _scratch(name, device, dtype, numel):
    key = (name, device, dtype)
    buf = _SCRATCH.get(key)
    if buf is None or buf.numel() < numel:
        buf = torch.zeros(max(numel, 1), dtype=dtype, device=device)
        _SCRATCH[key] = buf
    return buf


def _kiln_prefixsum_v2(x, *, y=None):
    """kiln's prefixsum_v2 (f32): Inclusive scan (GPU MODE prefixsum_v2): y[i] = x[0] + ... + x[i], f32 in and out, tolerance 1e-5 * sqrt(N) as the task's checker; cuda only (its verification shapes, up to the task's 2^28 elements, are too large for the cpu backend).

    Inputs: x [N] torch.float32;
    Returns y [N] torch.float32; pass an output as a keyword to write into it.
    All tensors contiguous, on one cuda device; the launch goes on the current stream.
    """
    dims = {}
    device = None
    device = _check("x", x, torch.float32, ("N", ), dims, device)
    if y is None:
        y = torch.empty((dims["N"], ), dtype=torch.float32, device=device)
    else:
        device = _check("y", y, torch.float32, ("N", ), dims, device)
    _EXT.kiln_launch(x, y, _scratch("status", device, torch.int64, dims["N"]), dims["N"])
    return y


def custom_kernel(data: input_t) -> output_t:
    y = _kiln_prefixsum_v2(data[0], y=data[1])
    return y
