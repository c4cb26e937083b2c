// Cross-entropy template: one block of BLOCK threads per row, a single pass over the logits with
// an online (max, sum) pair per thread: s = sum exp(x - m) over the elements seen. Each thread
// loads UNROLL 16-byte vectors at once (coalesced, stride BLOCK), takes their max (packed
// __hmax2 for f16/bf16), rescales s once per chunk and adds exp2(x * log2 e - a * log2 e) per
// element (one FFMA and one MUFU.EX2, a * log2 e's rounding error taken out once per chunk; the
// two-step exp2((x - a) * log2 e) when |a| > 1e38).
// A misaligned row start (head) and a ragged end (tail) go through a scalar path. The pairs are
// merged by warp shuffles, then across warps through shared memory. Thread 0 fetches the label at
// the start, reads its logit after the loop and writes loss = (m - x[label]) + logf(s).
// OCC = 1 asks for full occupancy (2048 threads per SM) through __launch_bounds__.
// Special values match the reference's lse = max + log(sum exp(x - max)): the anchor a is the
// running max, or 0 while that is -Inf, so -Inf elements add 0, NaN adds NaN, +Inf adds
// exp(Inf - Inf) = NaN, and an all -Inf row ends as -Inf - (-Inf) = NaN. A label outside [0, V)
// gives NaN.
#ifndef BLOCK
#define BLOCK 512
#endif
#ifndef UNROLL
#define UNROLL 4
#endif
#ifndef OCC
#define OCC 0
#endif

#if OCC
#define MIN_BLOCKS (2048 / BLOCK)
#else
#define MIN_BLOCKS 1
#endif

#define NEG_INF __int_as_float(0xff800000)  // NVRTC has no math.h
#define QNAN __int_as_float(0x7fffffff)
#define LOG2E 1.4426950408889634f

// P: what one 32-bit register of a loaded vector holds (two halves, two bfloat16s or a float).
template <typename U> struct PairOf { typedef float type; };
template <> struct PairOf<__half> { typedef __half2 type; };
template <> struct PairOf<__nv_bfloat16> { typedef __nv_bfloat162 type; };
typedef PairOf<T>::type P;

enum : int { VEC = 16 / sizeof(T) };  // elements per 16-byte load

// A 16-byte load is a uint4; each of its four 32-bit words is read as a P.
__device__ __forceinline__ P as_p(unsigned w) { return *reinterpret_cast<const P*>(&w); }

__device__ __forceinline__ float ex2(float x) {  // 2^x; -Inf -> 0, NaN -> NaN
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// Packed max (NaN ignored where the other operand is a number, like fmaxf).
__device__ __forceinline__ float max2(float a, float b) { return fmaxf(a, b); }
__device__ __forceinline__ __half2 max2(__half2 a, __half2 b) { return __hmax2(a, b); }
__device__ __forceinline__ __nv_bfloat162 max2(__nv_bfloat162 a, __nv_bfloat162 b) {
  return __hmax2(a, b);
}
__device__ __forceinline__ float hmax(float v) { return v; }
__device__ __forceinline__ float hmax(__half2 p) {
  const float2 f = __half22float2(p);
  return fmaxf(f.x, f.y);
}
__device__ __forceinline__ float hmax(__nv_bfloat162 p) {
  const float2 f = __bfloat1622float2(p);
  return fmaxf(f.x, f.y);
}

// s += exp(v - a) for each element of a register. FUSED: one FFMA, exp2(v * log2 e - aL) with
// aL = a * log2 e; otherwise exp2((v - a) * log2 e).
template <bool FUSED>
__device__ __forceinline__ void add_exp(float& s, float v, float a, float aL) {
  s += FUSED ? ex2(fmaf(v, LOG2E, -aL)) : ex2((v - a) * LOG2E);
}
template <bool FUSED>
__device__ __forceinline__ void add_exp(float& s, __half2 p, float a, float aL) {
  const float2 f = __half22float2(p);
  add_exp<FUSED>(s, f.x, a, aL);
  add_exp<FUSED>(s, f.y, a, aL);
}
template <bool FUSED>
__device__ __forceinline__ void add_exp(float& s, __nv_bfloat162 p, float a, float aL) {
  const float2 f = __bfloat1622float2(p);
  add_exp<FUSED>(s, f.x, a, aL);
  add_exp<FUSED>(s, f.y, a, aL);
}

template <bool FUSED, int N>
__device__ __forceinline__ void add_exps(float& s, const uint4 (&a)[N], float an, float aL) {
#pragma unroll
  for (int u = 0; u < N; ++u) {
    add_exp<FUSED>(s, as_p(a[u].x), an, aL);
    add_exp<FUSED>(s, as_p(a[u].y), an, aL);
    add_exp<FUSED>(s, as_p(a[u].z), an, aL);
    add_exp<FUSED>(s, as_p(a[u].w), an, aL);
  }
}

// The point exponents are taken from: the max, or 0 while the max is -Inf (no finite or +Inf
// element yet), so that -Inf - a stays -Inf (adds 0) instead of becoming NaN.
__device__ __forceinline__ float anchor(float m) { return m == NEG_INF ? 0.f : m; }

// Folds the N vectors in a into (m, s): one rescale of s per chunk.
template <int N>
__device__ __forceinline__ void add_chunk(float& m, float& s, const uint4 (&a)[N]) {
  P mx = as_p(a[0].x);
#pragma unroll
  for (int u = 0; u < N; ++u) {
    mx = max2(mx, as_p(a[u].x));
    mx = max2(mx, as_p(a[u].y));
    mx = max2(mx, as_p(a[u].z));
    mx = max2(mx, as_p(a[u].w));
  }
  const float cm = fmaxf(m, hmax(mx));
  const float an = anchor(cm);
  float cs = s * ex2((m - an) * LOG2E);
  // The fused form needs an * log2 e finite: |an| <= 1e38 (an = +Inf or a huge finite max takes
  // the two-step form, which gives exp(Inf - Inf) = NaN and exact differences as the reference).
  if (fabsf(an) <= 1e38f) {
    // aL is an * log2 e rounded; res, its rounding error, is exact (an FMA residual). The chunk's
    // terms are 2^(x log2 e - aL) = 2^res * exp(x - an): the factor 2^-res takes res out again.
    const float aL = an * LOG2E;
    const float res = fmaf(an, LOG2E, -aL);
    float t = 0.f;
    add_exps<true>(t, a, an, aL);
    cs = fmaf(t, ex2(-res), cs);
  } else {
    add_exps<false>(cs, a, an, 0.f);
  }
  m = cm;
  s = cs;
}

__device__ __forceinline__ void add_one(float& m, float& s, float v) {
  const float cm = fmaxf(m, v);
  const float an = anchor(cm);
  s = s * ex2((m - an) * LOG2E) + ex2((v - an) * LOG2E);
  m = cm;
}

// (m, s) <- the union of (m, s) and (m2, s2), expressed at the larger max.
__device__ __forceinline__ void merge(float& m, float& s, float m2, float s2) {
  const float mm = fmaxf(m, m2);
  const float an = anchor(mm);
  s = s * ex2((m - an) * LOG2E) + s2 * ex2((m2 - an) * LOG2E);
  m = mm;
}

__device__ __forceinline__ void warp_merge(float& m, float& s) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float m2 = __shfl_xor_sync(0xffffffffu, m, o);
    const float s2 = __shfl_xor_sync(0xffffffffu, s, o);
    merge(m, s, m2, s2);
  }
}

extern "C" __global__ void __launch_bounds__(BLOCK, MIN_BLOCKS)
    cross_entropy(const T* __restrict__ logits, const int* __restrict__ labels,
                  float* __restrict__ loss, long long M, long long V) {
  __shared__ float warp_m[BLOCK / 32], warp_s[BLOCK / 32];
  const long long row = blockIdx.x;
  const int tid = threadIdx.x;
  const T* x = logits + row * V;

  // The label, fetched early by the thread that writes the result; its logit is read after the
  // streaming loop, so that warp 0 does not wait on the label before its first loads.
  int label = 0;
  if (tid == 0) label = labels[row];

  // Elements [0, head) precede the first 16-byte boundary; [tail_start, V) follow the last one.
  const unsigned mis = static_cast<unsigned>(reinterpret_cast<unsigned long long>(x) & 15u);
  long long head = static_cast<long long>(((16u - mis) & 15u) / sizeof(T));
  if (head > V) head = V;
  const long long nv = (V - head) / VEC;
  const long long tail_start = head + nv * VEC;

  float m = NEG_INF, s = 0.f;
  const uint4* xv = reinterpret_cast<const uint4*>(x + head);
  long long i = tid;
  for (; i + (UNROLL - 1) * BLOCK < nv; i += UNROLL * BLOCK) {
    uint4 a[UNROLL];
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) a[u] = xv[i + u * BLOCK];
    add_chunk(m, s, a);
  }
  for (; i < nv; i += BLOCK) {
    uint4 a[1];
    a[0] = xv[i];
    add_chunk(m, s, a);
  }
  if (tid < head) add_one(m, s, to_f32(x[tid]));
  if (tid < V - tail_start) add_one(m, s, to_f32(x[tail_start + tid]));

  float x_label = 0.f;
  if (tid == 0) x_label = (label >= 0 && label < V) ? to_f32(x[label]) : QNAN;

  warp_merge(m, s);
  const int lane = tid & 31, warp = tid >> 5;
  if (lane == 0) {
    warp_m[warp] = m;
    warp_s[warp] = s;
  }
  __syncthreads();
  if (warp == 0) {
    m = lane < BLOCK / 32 ? warp_m[lane] : NEG_INF;
    s = lane < BLOCK / 32 ? warp_s[lane] : 0.f;
    warp_merge(m, s);
    // (m - x[label]) + log(s) is lse - x[label] reordered: m - x[label] is exact when the label's
    // logit is near the max, so no rounding of lse at the scale of m. IEEE classes as lse - x:
    // +Inf in the row or NaN make s NaN; all -Inf gives -Inf - (-Inf) = NaN; a -Inf label +Inf.
    if (lane == 0) loss[row] = (m - x_label) + logf(s);
  }
}
