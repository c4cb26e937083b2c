// Measures and caches the copy bandwidth of a device.
#include "evaluator/ceilings.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

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

constexpr const char* kCpuCopy = R"(
#include <cstdint>
extern "C" void kiln_copy(const float* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = src[i];
}
)";

std::string file_key(const std::string& s) {
  std::string out;
  for (char c : s) out += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return out;
}

}  // namespace

Result<Ceilings> load_or_measure_ceilings(const SandboxOptions& base, Compiler& compiler,
                                          const std::string& cache_dir, bool remeasure) {
  const bool cuda = base.backend == "cuda";
  // 512 MiB each way on a GPU (10x an H100's L2); 128 MiB on a host.
  const size_t bytes = cuda ? (size_t{512} << 20) : (size_t{128} << 20);
  SandboxOptions options = base;
  options.arena_bytes = 2 * bytes + (1 << 20);
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Sandbox> sandbox, Sandbox::spawn(options));

  fs::path dir = fs::path(cache_dir) / "ceilings";
  fs::path file = dir / (file_key(sandbox->arch() + "-" + sandbox->device_name()) + ".json");
  if (!remeasure && fs::exists(file)) {
    std::ifstream in(file);
    nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (j.is_object() && j.value("bandwidth_bytes_per_s", 0.0) > 0) {
      return Ceilings{j.value("device", ""), j.value("arch", ""), j.value("bandwidth_bytes_per_s", 0.0),
                      j.value("matrix_flops_per_s", 0.0), j.value("copy_bytes", 0.0)};
    }
  }

  CompileRequest req;
  req.source = cuda ? std::string(kCudaCopy) : std::string(kCpuCopy);
  req.kernel_name = "kiln_copy";
  req.arch = sandbox->arch();
  req.signature = {{ArgSpec::Kind::kTensorIn, DType::kF32, "src"},
                   {ArgSpec::Kind::kTensorOut, DType::kF32, "dst"},
                   {ArgSpec::Kind::kInt64, DType::kI64, "n"}};
  CompileOutput out = compiler.compile(req);
  if (!out.ok) return internal_error("compiling the bandwidth probe failed:\n" + out.log);
  fs::create_directories(dir);
  fs::path bin = dir / ("copy-" + out.cache_key.substr(0, 16) + (cuda ? ".cubin" : ".so"));
  std::ofstream(bin, std::ios::binary) << out.binary;
  KILN_ASSIGN_OR_RETURN(nlohmann::json loaded,
                        sandbox->call({{"op", "load"}, {"path", bin.string()}, {"kernel", "kiln_copy"}}, 60000));
  if (!loaded.value("ok", false)) return internal_error("loading the bandwidth probe: " + loaded.dump());

  // Non-zero source data (zeros can run faster than real data).
  std::fill(sandbox->arena(), sandbox->arena() + bytes, static_cast<unsigned char>(0x3C));
  const int64_t n = cuda ? static_cast<int64_t>(bytes / 16) : static_cast<int64_t>(bytes / 4);
  nlohmann::json req_json = {
      {"op", "time"}, {"handle", loaded["handle"]},
      {"grid", {cuda ? (n + 1023) / 1024 : 1, 1, 1}}, {"block", {cuda ? 256 : 1, 1, 1}},
      {"shared_bytes", 0},
      {"args", {{{"tensor", 0}}, {{"tensor", 1}}, {{"i64", n}}}},
      {"sets", {{{{"offset", 0}, {"bytes", bytes}, {"out", false}},
                 {{"offset", bytes}, {"bytes", bytes}, {"out", true}}}}},
      {"warmup", 3}, {"min_samples", 20}, {"max_samples", 200}, {"max_ms", 2000},
      {"target_noise_rel", 0.005}, {"flush_l2", true}, {"poison", 0}};
  KILN_ASSIGN_OR_RETURN(nlohmann::json timed, sandbox->call(req_json, 120000));
  if (!timed.value("ok", false)) return internal_error("timing the bandwidth probe: " + timed.dump());
  TimingStats t = timing_stats(timed["samples_us"].get<std::vector<double>>(),
                               timed["clocks_mhz"].get<std::vector<double>>(), 0.95);
  if (t.median_us <= 0) return internal_error("the bandwidth probe produced no samples");
  if (sandbox->arena()[bytes + 12345] != 0x3C) {
    return internal_error("the bandwidth probe did not copy its input; refusing its timing");
  }
  Ceilings c{sandbox->device_name(), sandbox->arch(), 2.0 * bytes / (t.median_us * 1e-6), 0,
             2.0 * bytes};
  nlohmann::json j = {{"device", c.device}, {"arch", c.arch},
                      {"bandwidth_bytes_per_s", c.bandwidth_bytes_per_s},
                      {"matrix_flops_per_s", c.matrix_flops_per_s}, {"copy_bytes", c.copy_bytes},
                      {"median_us", t.median_us}, {"samples", t.samples}};
  std::string tmp = file.string() + ".tmp";
  std::ofstream(tmp) << j.dump(2) << "\n";
  fs::rename(tmp, file);
  return c;
}

}  // namespace kiln::eval
