// Measures and caches the copy bandwidth of a device.
#include "evaluator/ceilings.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "evaluator/evaluation.h"
#include "evaluator/prelude.h"

namespace kiln::eval {
namespace fs = std::filesystem;
namespace {

constexpr const char* kCudaCopy = R"(
extern "C" __global__ void kiln_copy(const uint4* __restrict__ src, uint4* __restrict__ dst,
                                     long long n) {
  const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n;
       i += stride) {
    dst[i] = src[i];
  }
}
)";

constexpr const char* kCudaMmaProbe = R"PROBE(
// Tensor-core rate probe (sm_90a): each warpgroup issues wgmma m64n128k16 (f16 in, f32
// accumulate) from shared-memory tiles in a loop; the values do not matter, only the issue rate.
#include <cuda_fp16.h>

__device__ __forceinline__ unsigned long long kiln_desc(const void* p) {
  unsigned addr = static_cast<unsigned>(__cvta_generic_to_shared(p));
  unsigned long long desc = (addr & 0x3FFFF) >> 4;
  desc |= static_cast<unsigned long long>(128 >> 4) << 16;  // leading byte offset
  desc |= static_cast<unsigned long long>(256 >> 4) << 32;  // stride byte offset
  return desc;                                              // no swizzle
}

__device__ __forceinline__ void kiln_wgmma(float (&d)[64], unsigned long long da,
                                           unsigned long long db) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
      "}, %64, %65, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
        "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
        "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
        "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "l"(da), "l"(db), "r"(1));
}

extern "C" __global__ void __launch_bounds__(128) kiln_mma_probe(float* out, long long iters) {
  __shared__ __align__(128) __half a_tile[64 * 16];
  __shared__ __align__(128) __half b_tile[16 * 128];
  for (int i = threadIdx.x; i < 64 * 16; i += 128) a_tile[i] = __float2half(0.01f * (i % 7 + 1));
  for (int i = threadIdx.x; i < 16 * 128; i += 128) b_tile[i] = __float2half(0.01f * (i % 5 + 1));
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  __syncthreads();
  float d[64];
#pragma unroll
  for (int i = 0; i < 64; ++i) d[i] = 0.f;
  const unsigned long long da = kiln_desc(a_tile), db = kiln_desc(b_tile);
  for (long long it = 0; it < iters; ++it) {
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
    kiln_wgmma(d, da, db);
    kiln_wgmma(d, da, db);
    kiln_wgmma(d, da, db);
    kiln_wgmma(d, da, db);
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
    asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
  }
  float s = 0.f;
#pragma unroll
  for (int i = 0; i < 64; ++i) s += d[i];
  if (threadIdx.x == 0) out[blockIdx.x] = s;
}
)PROBE";

// Host copy-rate probe: an L1-sized buffer copied `reps` times by a loop the compiler vectorises
// (mode 0) or by memcpy (mode 1). Each pass is a call through a volatile function pointer, which
// the compiler cannot see through, so the passes can be neither merged nor dropped (inline asm
// would say the same more cheaply, but the cpu compiler refuses asm in any source).
constexpr const char* kCpuCopy = R"(
#include <cstdint>
#include <cstring>
static void copy_loop(const float* __restrict__ src, float* __restrict__ dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = src[i];
}
static void copy_memcpy(const float* __restrict__ src, float* __restrict__ dst, int64_t n) {
  std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
}
extern "C" void host_copy_probe(const float* src, float* dst, int64_t n, int64_t reps,
                                int64_t mode) {
  void (*volatile pass)(const float*, float*, int64_t) = mode == 0 ? copy_loop : copy_memcpy;
  for (int64_t r = 0; r < reps; ++r) pass(src, dst, n);
}
)";

// The host probe's buffer (each way: 16 KiB in all, inside any L1d) and passes per launch (256 MiB
// read + written: about half a millisecond at 500 GB/s).
constexpr size_t kHostCopyBytes = size_t{8} << 10;
constexpr int64_t kHostCopyPasses = 16384;
// What a cpu cache file's figure is; a file without it (an older probe's) is measured again.
constexpr const char* kHostProbeName = "l1_copy_one_core";

std::string file_key(const std::string& s) {
  std::string out;
  for (char c : s) out += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return out;
}

// Compiles and loads a probe kernel in `sandbox`; returns its handle. `what` names it in errors.
Result<nlohmann::json> load_probe(Sandbox& sandbox, Compiler& compiler, const CompileRequest& req,
                                  const fs::path& dir, const std::string& what) {
  CompileOutput out = compiler.compile(req);
  if (!out.ok) return internal_error("compiling the " + what + " failed:\n" + out.log);
  fs::create_directories(dir);
  fs::path bin = dir / (req.kernel_name + "-" + out.cache_key.substr(0, 16) +
                        (sandbox.backend() == "cuda" ? ".cubin" : ".so"));
  std::ofstream(bin, std::ios::binary) << out.binary;
  KILN_ASSIGN_OR_RETURN(nlohmann::json loaded,
                        sandbox.call({{"op", "load"}, {"path", bin.string()}, {"kernel", req.kernel_name}}, 60000));
  if (!loaded.value("ok", false)) return internal_error("loading the " + what + ": " + loaded.dump());
  return loaded["handle"];
}

// Runs the "time" request `timing` on the loaded probe `handle` and returns the statistics of its
// samples.
Result<TimingStats> time_probe(Sandbox& sandbox, const nlohmann::json& handle,
                               const std::string& what, nlohmann::json timing) {
  timing["op"] = "time";
  timing["handle"] = handle;
  KILN_ASSIGN_OR_RETURN(nlohmann::json timed, sandbox.call(timing, 120000));
  if (!timed.value("ok", false)) return internal_error("timing the " + what + ": " + timed.dump());
  TimingStats t = timing_stats(timed["samples_us"].get<std::vector<double>>(),
                               timed["clocks_mhz"].get<std::vector<double>>(), 0.95);
  if (t.median_us <= 0) return internal_error("the " + what + " produced no samples");
  return t;
}

Result<TimingStats> run_probe(Sandbox& sandbox, Compiler& compiler, const CompileRequest& req,
                              const fs::path& dir, const std::string& what, nlohmann::json timing) {
  KILN_ASSIGN_OR_RETURN(nlohmann::json handle, load_probe(sandbox, compiler, req, dir, what));
  return time_probe(sandbox, handle, what, std::move(timing));
}

// One host core's copy rate (bytes read + written per second) at its fastest: kHostCopyBytes
// copied kHostCopyPasses times per launch with no cache flush, by the loop and by memcpy, the best
// sample of either. The arena's first kHostCopyBytes are the source.
Result<double> measure_host_copy(Sandbox& sandbox, Compiler& compiler, const fs::path& dir) {
  CompileRequest req;
  req.source = kCpuCopy;
  req.kernel_name = "host_copy_probe";  // the cpu compiler reserves kiln_* for its trampolines
  req.arch = sandbox.arch();
  req.signature = {{ArgSpec::Kind::kTensorIn, DType::kF32, "src"},
                   {ArgSpec::Kind::kTensorOut, DType::kF32, "dst"},
                   {ArgSpec::Kind::kInt64, DType::kI64, "n"},
                   {ArgSpec::Kind::kInt64, DType::kI64, "reps"},
                   {ArgSpec::Kind::kInt64, DType::kI64, "mode"}};
  const std::string what = "host copy probe";
  KILN_ASSIGN_OR_RETURN(nlohmann::json handle, load_probe(sandbox, compiler, req, dir, what));
  const size_t bytes = kHostCopyBytes;
  const auto n = static_cast<int64_t>(bytes / sizeof(float));
  double best_us = 0;
  for (int64_t mode : {0, 1}) {
    // clang-format off
    nlohmann::json timing = {
        {"grid", {1, 1, 1}}, {"block", {1, 1, 1}}, {"shared_bytes", 0},
        {"args", {{{"tensor", 0}}, {{"tensor", 1}}, {{"i64", n}}, {{"i64", kHostCopyPasses}},
                  {{"i64", mode}}}},
        {"sets", {{{{"offset", 0}, {"bytes", bytes}, {"out", false}},
                   {{"offset", bytes}, {"bytes", bytes}, {"out", true}}}}},
        {"warmup", 3}, {"min_samples", 20}, {"max_samples", 100}, {"max_ms", 250},
        {"target_noise_rel", 0.005}, {"flush_l2", false}, {"poison", 0}};
    // clang-format on
    KILN_ASSIGN_OR_RETURN(TimingStats t, time_probe(sandbox, handle, what, timing));
    if (sandbox.arena()[bytes + bytes / 2 + 7] != 0x3C) {
      return internal_error("the host copy probe did not copy its input; refusing its timing");
    }
    best_us = best_us == 0 ? t.min_us : std::min(best_us, t.min_us);
  }
  const double rate = 2.0 * static_cast<double>(bytes) * kHostCopyPasses / (best_us * 1e-6);
  // No core copies 100 TB/s: a figure like that means the passes were optimised away, and a floor
  // from it would reject nothing.
  if (!(rate > 0) || rate > 1e14) {
    return internal_error("the host copy probe measured an implausible " +
                          std::to_string(rate / 1e9) + " GB/s");
  }
  return rate;
}

std::string host_name() {
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) != 0 || host[0] == '\0') return "unknown-host";
  return host;
}

// Dense f16 tensor-core rate (flop/s) from the wgmma probe: many warpgroups per SM issuing
// m64n128k16 back to back. The floor check divides flops by it, so it must not underestimate the
// device: the probe keeps the tensor cores busy from registers and shared memory alone.
Result<double> measure_matrix_rate(Sandbox& sandbox, Compiler& compiler, const fs::path& dir) {
  CompileRequest req;
  req.source = kCudaMmaProbe;
  req.kernel_name = "kiln_mma_probe";
  req.arch = sandbox.arch();
  req.signature = {{ArgSpec::Kind::kTensorOut, DType::kF32, "out"}, {ArgSpec::Kind::kInt64, DType::kI64, "iters"}};
  constexpr int64_t kBlocks = 1056;  // 4 warpgroups on each of up to 264 SMs
  constexpr int64_t kIters = 2048;
  nlohmann::json timing = {
      {"grid", {kBlocks, 1, 1}}, {"block", {128, 1, 1}},
      {"shared_bytes", 0}, {"args", {{{"tensor", 0}}, {{"i64", kIters}}}},
      {"sets", {{{{"offset", 0}, {"bytes", kBlocks * 4}, {"out", true}}}}},
      {"warmup", 3}, {"min_samples", 10}, {"max_samples", 100}, {"max_ms", 1000},
      {"target_noise_rel", 0.005}, {"flush_l2", false}, {"poison", 0}};
  KILN_ASSIGN_OR_RETURN(TimingStats t,
                        run_probe(sandbox, compiler, req, dir, "tensor-core probe", timing));
  const double flops = 2.0 * 64 * 128 * 16 * 4 * kIters * kBlocks;
  // The best sample, not the median: the floor must never be stricter than what the device did.
  return flops / (t.min_us * 1e-6);
}

}  // namespace

double floor_bandwidth(const Ceilings& c) {
  return c.arch == "cpu" ? kHostFloorMargin * c.bandwidth_bytes_per_s : c.bandwidth_bytes_per_s;
}

std::string ceilings_line(const Ceilings& c) {
  char buf[512];
  if (c.arch != "cpu") {
    std::snprintf(buf, sizeof(buf), "device ceilings: copy %.2f TB/s",
                  c.bandwidth_bytes_per_s / 1e12);
    std::string line = buf;
    if (c.matrix_flops_per_s > 0) {
      std::snprintf(buf, sizeof(buf), ", f16 tensor cores %.0f TFLOP/s",
                    c.matrix_flops_per_s / 1e12);
      line += buf;
    }
    return line;
  }
  std::string where;
  if (c.measured) {
    std::snprintf(buf, sizeof(buf), "measured now in %.1f s, once per host", c.measure_s);
    where = buf;
    where += c.cache_file.empty() ? std::string("; not cached") : "; cached in " + c.cache_file;
  } else {
    where = "cached in " + c.cache_file + "; --remeasure measures again";
  }
  std::snprintf(
      buf, sizeof(buf),
      "host ceilings: copy %.1f GB/s on one core, L1-resident (%s); the floor allows up to "
      "%.2f TB/s (%gx that)",
      c.bandwidth_bytes_per_s / 1e9, where.c_str(), floor_bandwidth(c) / 1e12, kHostFloorMargin);
  return buf;
}

Result<Ceilings> load_or_measure_ceilings(const SandboxOptions& base, Compiler& compiler,
                                          const std::string& cache_dir, CeilingsMode mode) {
  const char* injected = std::getenv("CUDA_INJECTION64_PATH");
  const bool under_tool = injected && *injected;
  const bool cuda = base.backend == "cuda";
  // 512 MiB each way on a GPU (10x an H100's L2); an L1-sized buffer on a host.
  const size_t bytes = cuda ? (size_t{512} << 20) : kHostCopyBytes;
  SandboxOptions options = base;
  options.arena_bytes = 2 * bytes + (1 << 20);
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Sandbox> sandbox, Sandbox::spawn(options));

  // Per GPU model; per CPU model and host on a host (a VM's model name can be as vague as
  // "Intel(R) Xeon(R) Processor", and a cache folder can be shared between hosts).
  fs::path dir = fs::path(cache_dir) / "ceilings";
  const std::string key = cuda ? sandbox->arch() + "-" + sandbox->device_name()
                               : sandbox->arch() + "-" + sandbox->device_name() + "-" + host_name();
  fs::path file = dir / (file_key(key) + ".json");
  std::optional<Ceilings> cached;
  if (fs::exists(file)) {
    std::ifstream in(file);
    nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
    const bool needs_matrix = cuda && sandbox->arch() == "sm_90a";
    if (j.is_object() && j.value("bandwidth_bytes_per_s", 0.0) > 0 &&
        (!needs_matrix || j.value("matrix_flops_per_s", 0.0) > 0) &&
        (cuda || j.value("probe", "") == kHostProbeName)) {
      cached = Ceilings{j.value("device", ""),
                        j.value("arch", ""),
                        j.value("bandwidth_bytes_per_s", 0.0),
                        j.value("matrix_flops_per_s", 0.0),
                        j.value("copy_bytes", 0.0),
                        file.string()};
    }
  }
  if (cached && (mode == CeilingsMode::kUseCache || under_tool)) return *cached;

  const auto start = std::chrono::steady_clock::now();
  Ceilings c{sandbox->device_name(), sandbox->arch(), 0, 0, 0, file.string(), true};
  nlohmann::json record;
  if (cuda) {
    CompileRequest req;
    req.source = kCudaCopy;
    // Named kiln_* so profilers can leave kiln's own kernels out.
    req.kernel_name = "kiln_copy";
    req.arch = sandbox->arch();
    req.signature = {{ArgSpec::Kind::kTensorIn, DType::kF32, "src"},
                     {ArgSpec::Kind::kTensorOut, DType::kF32, "dst"},
                     {ArgSpec::Kind::kInt64, DType::kI64, "n"}};
    // Non-zero source data (zeros can run faster than real data).
    std::fill(sandbox->arena(), sandbox->arena() + bytes, static_cast<unsigned char>(0x3C));
    const auto n = static_cast<int64_t>(bytes / 16);
    // clang-format off
    nlohmann::json timing = {
        {"grid", {(n + 1023) / 1024, 1, 1}}, {"block", {256, 1, 1}},
        {"shared_bytes", 0},
        {"args", {{{"tensor", 0}}, {{"tensor", 1}}, {{"i64", n}}}},
        {"sets", {{{{"offset", 0}, {"bytes", bytes}, {"out", false}},
                   {{"offset", bytes}, {"bytes", bytes}, {"out", true}}}}},
        {"warmup", 3}, {"min_samples", 20}, {"max_samples", 200}, {"max_ms", 2000},
        {"target_noise_rel", 0.005}, {"flush_l2", true}, {"poison", 0}};
    // clang-format on
    KILN_ASSIGN_OR_RETURN(TimingStats t,
                          run_probe(*sandbox, compiler, req, dir, "bandwidth probe", timing));
    if (sandbox->arena()[bytes + 12345] != 0x3C) {
      return internal_error("the bandwidth probe did not copy its input; refusing its timing");
    }
    // The best sample, not the median: the floor must never be stricter than what the device did.
    c.bandwidth_bytes_per_s = 2.0 * bytes / (t.min_us * 1e-6);
    c.copy_bytes = 2.0 * bytes;
    record = {{"median_us", t.median_us}, {"samples", t.samples}};
    if (sandbox->arch() == "sm_90a") {
      Result<double> rate = measure_matrix_rate(*sandbox, compiler, dir);
      if (!rate.is_ok()) return rate.status().with_context("measuring the tensor-core rate");
      c.matrix_flops_per_s = *rate;
    }
  } else {
    std::fill(sandbox->arena(), sandbox->arena() + bytes, static_cast<unsigned char>(0x3C));
    Result<double> rate = measure_host_copy(*sandbox, compiler, dir);
    if (!rate.is_ok()) return rate.status().with_context("measuring the host's copy rate");
    c.bandwidth_bytes_per_s = *rate;
    c.copy_bytes = 2.0 * static_cast<double>(bytes) * kHostCopyPasses;
    record = {{"probe", kHostProbeName}, {"host", host_name()}, {"floor_margin", kHostFloorMargin}};
  }
  c.measure_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (under_tool) {
    spdlog::warn("device ceilings measured under an injected CUDA tool ({}): used by this process "
                 "only, not cached", injected);
    c.cache_file.clear();
    return c;
  }
  if (cached && mode == CeilingsMode::kKeepHigher) {
    c.bandwidth_bytes_per_s = std::max(c.bandwidth_bytes_per_s, cached->bandwidth_bytes_per_s);
    c.matrix_flops_per_s = std::max(c.matrix_flops_per_s, cached->matrix_flops_per_s);
  }
  nlohmann::json j = {{"device", c.device},
                      {"arch", c.arch},
                      {"bandwidth_bytes_per_s", c.bandwidth_bytes_per_s},
                      {"matrix_flops_per_s", c.matrix_flops_per_s},
                      {"copy_bytes", c.copy_bytes},
                      {"measure_s", c.measure_s}};
  j.update(record);
  // Evaluators that start together may all measure: each writes a file of its own, then renames
  // it over the cache (the last one wins; every one is a whole file).
  fs::create_directories(dir);
  const std::string tmp = file.string() + "." + std::to_string(getpid()) + ".tmp";
  std::ofstream(tmp) << j.dump(2) << "\n";
  std::error_code ec;
  fs::rename(tmp, file, ec);
  if (ec) {
    spdlog::warn("could not cache the device ceilings in {}: {}", file.string(), ec.message());
    fs::remove(tmp, ec);
    c.cache_file.clear();
  }
  return c;
}

}  // namespace kiln::eval
