// Measures and caches the copy bandwidth of a device, its tensor-core issue rate and the rate a
// real GEMM attains on it.
#include "evaluator/ceilings.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "evaluator/ceiling_probes.h"
#include "evaluator/evaluation.h"
#include "evaluator/prelude.h"
#include "evaluator/tensor_data.h"
#include "evaluator/toolchain.h"
#include "shared/atomic_file.h"
#include "shared/backends.h"

namespace kiln::eval {
namespace fs = std::filesystem;
namespace {

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
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return unavailable("creating " + dir.string() + ": " + ec.message());
  fs::path bin = dir / (req.kernel_name + "-" + out.cache_key.substr(0, 16) +
                        (sandbox.backend() == "cuda" ? ".cubin" : ".so"));
  // Evaluators that start together share the folder: each writes the whole probe or none of it.
  KILN_RETURN_IF_ERROR(write_file_atomically(bin.string(), out.binary));
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
  req.source = kCopyProbeHost;
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
  req.source = kMatrixRateProbeCuda;
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

// What a cache file's attainable figure is; a file without it (an older kiln's, or another
// GEMM's) is measured again where the GEMM applies.
constexpr const char* kGemmProbeName = "mma_sync_tn_f16_gemm_4096_128x256x64_v1";

// The attainable GEMM's rate (flop/s): 4096^3 on N(0, 1) f16 data (zeros or constants can run
// faster than real data), timed as a candidate is (L2 flushed before each sample; the median,
// which is what a candidate is reported at, not the best sample), and believed only after its
// output matched host dot products. A at arena offset 0, B after it, C after B: 96 MiB.
Result<double> measure_attainable_gemm(Sandbox& sandbox, Compiler& compiler, const fs::path& dir) {
  const std::string what = "attainable GEMM";
  const int64_t n = kAttainableGemmSize;
  const size_t elems = static_cast<size_t>(n * n), in_bytes = 2 * elems;
  const size_t b_off = in_bytes, c_off = 2 * in_bytes;
  if (sandbox.arena_bytes() < 3 * in_bytes)
    return internal_error("the arena is too small for the " + what);
  unsigned char* arena = sandbox.arena();
  constexpr size_t kSlice = size_t{1} << 20;  // values generated at a time; 2 * elems is a multiple
  std::vector<double> values(kSlice);
  for (size_t done = 0, slice = 0; done < 2 * elems; done += kSlice, ++slice) {
    generate(Distribution::kNormal, DType::kF16, 0x6b696c6e00 + slice, kSlice, values.data(),
             arena + 2 * done);
  }
  const CompileRequest req = attainable_gemm_request(sandbox.arch());
  // clang-format off
  nlohmann::json timing = {
      {"grid", {n / kAttainableGemmTileN, n / kAttainableGemmTileM, 1}},
      {"block", {kAttainableGemmThreads, 1, 1}},
      {"shared_bytes", attainable_gemm_shared_bytes(sandbox.arch())},
      {"args", {{{"tensor", 0}}, {{"tensor", 1}}, {{"tensor", 2}}, {{"i64", n}}, {{"i64", n}},
                {{"i64", n}}}},
      {"sets", {{{{"offset", 0}, {"bytes", in_bytes}, {"out", false}},
                 {{"offset", b_off}, {"bytes", in_bytes}, {"out", false}},
                 {{"offset", c_off}, {"bytes", in_bytes}, {"out", true}}}}},
      {"warmup", 3}, {"min_samples", 20}, {"max_samples", 200}, {"max_ms", 300},
      {"target_noise_rel", 0.005}, {"flush_l2", true}, {"poison", 255}};
  // clang-format on
  KILN_ASSIGN_OR_RETURN(TimingStats t, run_probe(sandbox, compiler, req, dir, what, timing));

  // C of the last launch is back in the arena (each launch's output was poisoned first). Check
  // the matrix's corners and 60 random places against host dot products of the same f16 inputs:
  // a kernel that computes something else reports no rate. The tolerance allows f16 rounding of
  // the output and f32 accumulation; a wrong element is off by about the norm (~90 here).
  std::vector<double> a(n), b(n);
  uint64_t state = 0x853c49e6748fea9bULL;
  auto next = [&state, n] {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<int64_t>((state >> 33) % static_cast<uint64_t>(n));
  };
  for (int i = 0; i < 64; ++i) {
    const int64_t row = i < 4 ? (i & 1 ? n - 1 : 0) : next();
    const int64_t col = i < 4 ? (i & 2 ? n - 1 : 0) : next();
    decode(DType::kF16, arena + 2 * row * n, n, a.data());
    decode(DType::kF16, arena + b_off + 2 * col * n, n, b.data());
    double ref = 0, sum_sq = 0, got = 0;
    for (int64_t k = 0; k < n; ++k) {
      ref += a[k] * b[k];
      sum_sq += a[k] * b[k] * a[k] * b[k];
    }
    decode(DType::kF16, arena + c_off + 2 * (row * n + col), 1, &got);
    const double tol = 1e-2 * std::sqrt(sum_sq) + 2e-3 * std::abs(ref);
    if (!(std::abs(got - ref) <= tol)) {
      char buf[256];
      std::snprintf(buf, sizeof(buf),
                    "the %s computed C[%lld][%lld] = %g, expected %g (tolerance %g); refusing its "
                    "rate",
                    what.c_str(), static_cast<long long>(row), static_cast<long long>(col), got,
                    ref, tol);
      return internal_error(buf);
    }
  }
  const double rate = 2.0 * static_cast<double>(n) * n * n / (t.median_us * 1e-6);
  // No GPU does 10 PFLOP/s of dense f16 (a B200 does about 2.3).
  if (!(rate > 0) || rate > 1e16) {
    return internal_error("the " + what + " measured an implausible " +
                          std::to_string(rate / 1e12) + " TFLOP/s");
  }
  return rate;
}

int sm_number(const std::string& arch) {
  if (arch.rfind("sm_", 0) != 0) return 0;
  return std::atoi(arch.c_str() + 3);
}

}  // namespace

bool attainable_gemm_applies(const std::string& arch) { return sm_number(arch) >= 80; }

uint32_t attainable_gemm_shared_bytes(const std::string& arch) {
  const int sm = sm_number(arch);
  const bool large = sm == 80 || sm == 87 || (sm >= 90 && sm < 120);
  const uint32_t stage = (kAttainableGemmTileM + kAttainableGemmTileN) * kAttainableGemmTileK * 2;
  return (large ? 3 : 2) * stage;
}

CompileRequest attainable_gemm_request(const std::string& arch) {
  CompileRequest req;
  req.source = kAttainableGemmCuda;
  req.kernel_name = "kiln_gemm";  // kiln_*: profilers leave kiln's own kernels out
  req.arch = arch;
  const uint32_t stage = (kAttainableGemmTileM + kAttainableGemmTileN) * kAttainableGemmTileK * 2;
  req.defines["KILN_GEMM_STAGES"] = std::to_string(attainable_gemm_shared_bytes(arch) / stage);
  req.signature = {
      {ArgSpec::Kind::kTensorIn, DType::kF16, "A"},  {ArgSpec::Kind::kTensorIn, DType::kF16, "B"},
      {ArgSpec::Kind::kTensorOut, DType::kF16, "C"}, {ArgSpec::Kind::kInt64, DType::kI64, "M"},
      {ArgSpec::Kind::kInt64, DType::kI64, "N"},     {ArgSpec::Kind::kInt64, DType::kI64, "K"}};
  return req;
}

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
    if (c.attainable_flops_per_s > 0) {
      std::snprintf(buf, sizeof(buf), ", f16 GEMM attains %.0f TFLOP/s",
                    c.attainable_flops_per_s / 1e12);
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
  if (device_backend(base.backend) != base.backend) {
    // A triton evaluator's GPU is measured by the cuda backend's probes (CUDA C++ through
    // NVRTC): the same figures, and the same cache entry, as a cuda evaluator's on that GPU.
    SandboxOptions device = base;
    device.backend = std::string(device_backend(base.backend));
    KILN_ASSIGN_OR_RETURN(std::unique_ptr<Toolchain> probes,
                          Toolchain::create(device.backend, cache_dir));
    return load_or_measure_ceilings(device, probes->compiler(), cache_dir, mode);
  }
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
    // An attainable figure of 0 under the GEMM's name (it failed here) is kept: --remeasure tries
    // again.
    const bool needs_gemm = cuda && attainable_gemm_applies(sandbox->arch());
    if (j.is_object() && j.value("bandwidth_bytes_per_s", 0.0) > 0 &&
        (!needs_matrix || j.value("matrix_flops_per_s", 0.0) > 0) &&
        (!needs_gemm || j.value("attainable_probe", "") == kGemmProbeName) &&
        (cuda || j.value("probe", "") == kHostProbeName)) {
      cached = Ceilings{j.value("device", ""),
                        j.value("arch", ""),
                        j.value("bandwidth_bytes_per_s", 0.0),
                        j.value("matrix_flops_per_s", 0.0),
                        j.value("attainable_flops_per_s", 0.0),
                        j.value("attainable_error", ""),
                        j.value("copy_bytes", 0.0),
                        file.string()};
    }
  }
  if (cached && (mode == CeilingsMode::kUseCache || under_tool)) return *cached;

  const auto start = std::chrono::steady_clock::now();
  Ceilings c{sandbox->device_name(), sandbox->arch(), 0, 0, 0, "", 0, file.string(), true};
  nlohmann::json record;
  if (cuda) {
    CompileRequest req;
    req.source = kCopyProbeCuda;
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
    // Last: a GEMM that kills the sandbox leaves nothing else unmeasured. Its failure costs the
    // report its attainable figure, not the floor.
    if (attainable_gemm_applies(sandbox->arch())) {
      const auto gemm_start = std::chrono::steady_clock::now();
      Result<double> rate = measure_attainable_gemm(*sandbox, compiler, dir);
      record["attainable_measure_s"] =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - gemm_start).count();
      if (rate.is_ok()) {
        c.attainable_flops_per_s = *rate;
      } else {
        c.attainable_error = rate.status().message();
        spdlog::warn(
            "measuring the attainable GEMM rate: {} (fraction_of_attainable is not "
            "reported)",
            c.attainable_error);
      }
      record["attainable_probe"] = kGemmProbeName;
      record["attainable_error"] = c.attainable_error;
    }
    // A real GEMM's median faster than the issue-rate probe's best sample means the probe
    // underestimates the device, and a floor from it would reject honest kernels (docs/threats.md
    // row 9): the floor takes the GEMM's rate instead.
    if (c.matrix_flops_per_s > 0 && c.attainable_flops_per_s > c.matrix_flops_per_s) {
      spdlog::warn(
          "the attainable GEMM ({:.0f} TFLOP/s) beat the tensor-core probe ({:.0f} "
          "TFLOP/s); the floor uses the GEMM's rate",
          c.attainable_flops_per_s / 1e12, c.matrix_flops_per_s / 1e12);
      c.matrix_flops_per_s = c.attainable_flops_per_s;
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
    if (cached->attainable_flops_per_s > c.attainable_flops_per_s) {
      c.attainable_flops_per_s = cached->attainable_flops_per_s;
      c.attainable_error.clear();
      if (record.contains("attainable_error")) record["attainable_error"] = "";
    }
  }
  nlohmann::json j = {{"device", c.device},
                      {"arch", c.arch},
                      {"bandwidth_bytes_per_s", c.bandwidth_bytes_per_s},
                      {"matrix_flops_per_s", c.matrix_flops_per_s},
                      {"attainable_flops_per_s", c.attainable_flops_per_s},
                      {"copy_bytes", c.copy_bytes},
                      {"measure_s", c.measure_s}};
  j.update(record);
  // Evaluators that start together may all measure: each writes a file of its own, then renames
  // it over the cache (the last one wins; every one is a whole file).
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (Status s = write_file_atomically(file.string(), j.dump(2) + "\n"); !s.is_ok()) {
    spdlog::warn("could not cache the device ceilings: {}", s.message());
    c.cache_file.clear();
  }
  return c;
}

}  // namespace kiln::eval
