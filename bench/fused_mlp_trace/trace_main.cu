// The timeline of one fused_mlp launch (ARCH 2), for bench/fused_mlp_trace.sh: compiled with nvcc
// beside a `kiln export fused_mlp --format cuda` folder (-I EXPORT). It defines the template's
// timeline hooks (KILN_TRACE_*, empty in kiln's own builds: a kernel that reads a timer would not
// pass kiln's scan) and then includes the exported kernel, so the kernel is the exported one with
// its records switched on. Fills the inputs with small pseudo-random values, launches a few
// times, then REPS times with L2 flushed before each, and writes every record of every traced
// launch:
//   trace_main M D H REPS OUT.csv
// CSV columns: rep, block, kind (0, 1: a consumer warpgroup's tile; 2: the producer's wait for a
// row block of h), ticket, then the three times in ns from the launch's first record.
// Prints each traced launch's time (CUDA events) and record count on stdout.
// Records of 4 words, written by one thread each: a consumer warpgroup's tile (kind 0, 1: the
// warpgroup) or the producer's wait for a down tile's row block of h (kind 2). Word 0 = block << 40
// | kind << 32 | ticket; then %globaltimer (ns) when the wait began, when it ended (the tile's
// first slot full; the row block complete) and, for tiles, when the epilogue was done.
constexpr unsigned kTraceCap = 1u << 16;
__device__ unsigned long long kiln_trace[kTraceCap][4];
__device__ unsigned kiln_trace_count;
__device__ __forceinline__ unsigned long long trace_now() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;\n" : "=l"(t));
  return t;
}
__device__ __forceinline__ void trace_put(unsigned kind, long long ticket, unsigned long long t0,
                                          unsigned long long t1, unsigned long long t2) {
  const unsigned i = atomicAdd(&kiln_trace_count, 1u);
  if (i >= kTraceCap) return;
  kiln_trace[i][0] = static_cast<unsigned long long>(blockIdx.x) << 40 |
                     static_cast<unsigned long long>(kind) << 32 |
                     static_cast<unsigned long long>(ticket & 0xffffffffll);
  kiln_trace[i][1] = t0;
  kiln_trace[i][2] = t1;
  kiln_trace[i][3] = t2;
}
// The hooks, as the template's consumer loop and producer name them.
#define KILN_TRACE_AT(var) const unsigned long long var = trace_now()
#define KILN_TRACE_PUT(...) trace_put(__VA_ARGS__)
#define KILN_TRACE_TILE() \
  if ((ctid & 127) == 0) trace_put(cw, ticket, wait_from, full_at, trace_now())

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "fused_mlp.cu"

namespace {

#define CHECK(call)                                                                \
  do {                                                                             \
    const cudaError_t e_ = (call);                                                 \
    if (e_ != cudaSuccess) {                                                       \
      std::fprintf(stderr, "trace_main: %s: %s\n", #call, cudaGetErrorString(e_)); \
      std::exit(1);                                                                \
    }                                                                              \
  } while (0)

using Elem = kiln_fused_mlp::T;

// Uniform values in [-scale, scale) from a hash of the index (the same on every run).
__global__ void fill(Elem* p, long long n, float scale, unsigned salt) {
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    unsigned h = static_cast<unsigned>(i) * 2654435761u ^ salt;
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    p[i] = static_cast<Elem>((static_cast<float>(h & 0xffffff) / 8388608.f - 1.f) * scale);
  }
}

Elem* alloc_filled(long long n, float scale, unsigned salt) {
  Elem* p = nullptr;
  CHECK(cudaMalloc(&p, n * sizeof(Elem)));
  fill<<<1024, 256>>>(p, n, scale, salt);
  CHECK(cudaGetLastError());
  return p;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 6) {
    std::fprintf(stderr, "usage: trace_main M D H REPS OUT.csv\n");
    return 2;
  }
  const long long M = std::atoll(argv[1]), D = std::atoll(argv[2]), H = std::atoll(argv[3]);
  const int reps = std::atoi(argv[4]);
  const std::string why = kiln_fused_mlp::check(M, D, H);
  if (!why.empty()) {
    std::fprintf(stderr, "trace_main: the kernel cannot run at M=%lld D=%lld H=%lld: %s\n", M, D, H,
                 why.c_str());
    return 2;
  }
  Elem* x = alloc_filled(M * D, 1.f, 1);
  Elem* w1 = alloc_filled(D * H, 1.f / std::sqrt(static_cast<float>(D)), 2);
  Elem* w3 = alloc_filled(D * H, 1.f / std::sqrt(static_cast<float>(D)), 3);
  Elem* w2 = alloc_filled(H * D, 1.f / std::sqrt(static_cast<float>(H)), 4);
  Elem *y = nullptr, *h = nullptr;
  int* sync = nullptr;
  CHECK(cudaMalloc(&y, M * D * sizeof(Elem)));
  CHECK(cudaMalloc(&h, kiln_fused_mlp::h_bytes(M, D, H)));
  CHECK(cudaMalloc(&sync, kiln_fused_mlp::sync_bytes(M, D, H)));
  CHECK(cudaMemset(h, 0, kiln_fused_mlp::h_bytes(M, D, H)));
  CHECK(cudaMemset(sync, 0, kiln_fused_mlp::sync_bytes(M, D, H)));
  const size_t flush_bytes = size_t{256} << 20;  // larger than any Hopper L2
  void* flush = nullptr;
  CHECK(cudaMalloc(&flush, flush_bytes));
  auto run = [&] {
    std::string err;
    const cudaError_t e = kiln_fused_mlp::launch(x, w1, w3, w2, y, h, sync, M, D, H, 0, &err);
    if (e != cudaSuccess) {
      std::fprintf(stderr, "trace_main: launch: %s %s\n", cudaGetErrorString(e), err.c_str());
      std::exit(1);
    }
  };
  for (int i = 0; i < 3; ++i) run();
  CHECK(cudaDeviceSynchronize());

  FILE* out = std::fopen(argv[5], "w");
  if (!out) {
    std::perror(argv[5]);
    return 1;
  }
  std::fprintf(out, "rep,block,kind,ticket,t0_ns,t1_ns,t2_ns\n");
  cudaEvent_t start, stop;
  CHECK(cudaEventCreate(&start));
  CHECK(cudaEventCreate(&stop));
  std::vector<unsigned long long> rec(static_cast<size_t>(kTraceCap) * 4);
  for (int r = 0; r < reps; ++r) {
    const unsigned zero = 0;
    CHECK(cudaMemcpyToSymbol(kiln_trace_count, &zero, sizeof zero));
    CHECK(cudaMemset(flush, r & 0xff, flush_bytes));
    CHECK(cudaEventRecord(start));
    run();
    CHECK(cudaEventRecord(stop));
    CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    CHECK(cudaEventElapsedTime(&ms, start, stop));
    unsigned count = 0;
    CHECK(cudaMemcpyFromSymbol(&count, kiln_trace_count, sizeof count));
    const unsigned kept = count < kTraceCap ? count : kTraceCap;
    CHECK(cudaMemcpyFromSymbol(rec.data(), kiln_trace, size_t{kept} * 4 * sizeof(rec[0])));
    unsigned long long origin = ~0ull;
    for (unsigned i = 0; i < kept; ++i) origin = std::min(origin, rec[4 * i + 1]);
    auto rel = [&](unsigned long long t) { return t ? static_cast<long long>(t - origin) : -1ll; };
    for (unsigned i = 0; i < kept; ++i) {
      const unsigned long long w = rec[4 * i];
      std::fprintf(out, "%d,%llu,%llu,%llu,%lld,%lld,%lld\n", r, w >> 40, (w >> 32) & 0xff,
                   w & 0xffffffffull, rel(rec[4 * i + 1]), rel(rec[4 * i + 2]),
                   rel(rec[4 * i + 3]));
    }
    std::printf("rep %d: %.1f us, %u records%s\n", r, ms * 1000.f, count,
                count > kTraceCap ? " (more than the buffer holds: the rest are lost)" : "");
  }
  std::fclose(out);
  return 0;
}
