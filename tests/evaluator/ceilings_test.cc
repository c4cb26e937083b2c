// The ceilings cache on the cpu backend (the code path is the same for cuda; only the probe
// kernels differ): a first measurement is cached, kUseCache returns the cache, kKeepHigher
// repairs a cache that holds a figure lower than the device really reaches (a measurement taken
// under a profiler or on a busy GPU: with it honest kernels would be rejected as faster than
// possible), kReplace replaces it, and under an injected CUDA tool nothing measured is cached.
// The host's own figure: plausible for one core, measured once and then read back, and judged
// with kHostFloorMargin of room by the floor check. The attainable GEMM (a GPU figure; its run is
// tests/gpu/attainable_ceiling_test.cc): its kernel compiles with NVRTC for every arch it runs
// on, within each arch's shared memory, and the ceilings line reports it after the two figures
// bench/search_replay.cc reads back.
#include "evaluator/ceilings.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "evaluator/cuda/nvrtc_compiler.h"
#include "evaluator/toolchain.h"
#include "tests/support/test_env.h"

namespace kiln::eval {
namespace {

namespace fs = std::filesystem;

class CeilingsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    unsetenv("CUDA_INJECTION64_PATH");
    auto tc = Toolchain::create("cpu", dir_.path());
    ASSERT_TRUE(tc.is_ok()) << tc.status().to_string();
    toolchain_ = std::move(tc).value();
    options_.kiln_binary = testing::kiln_binary();
    options_.backend = "cpu";
  }
  void TearDown() override { unsetenv("CUDA_INJECTION64_PATH"); }

  Ceilings get(CeilingsMode mode) {
    auto c = load_or_measure_ceilings(options_, toolchain_->compiler(), dir_.path(), mode);
    EXPECT_TRUE(c.is_ok()) << c.status().to_string();
    return c.is_ok() ? *c : Ceilings{};
  }
  // The one cache file, or "" when there is none.
  std::string cache_file() const {
    const fs::path d = fs::path(dir_.path()) / "ceilings";
    if (!fs::exists(d)) return "";
    for (const auto& e : fs::directory_iterator(d)) {
      if (e.path().extension() == ".json") return e.path().string();
    }
    return "";
  }
  double cached_bandwidth() const {
    std::ifstream in(cache_file());
    return nlohmann::json::parse(in).value("bandwidth_bytes_per_s", 0.0);
  }
  void set_cached_bandwidth(double v) {
    const std::string f = cache_file();
    std::ifstream in(f);
    nlohmann::json j = nlohmann::json::parse(in);
    in.close();
    j["bandwidth_bytes_per_s"] = v;
    std::ofstream(f) << j.dump();
  }

  testing::TempDir dir_;
  std::unique_ptr<Toolchain> toolchain_;
  SandboxOptions options_;
};

TEST_F(CeilingsTest, AFigureBelowTheDevicesIsRepairedByTheDaemonsMeasurementNotByTheCache) {
  const Ceilings first = get(CeilingsMode::kUseCache);
  ASSERT_GT(first.bandwidth_bytes_per_s, 1e8);
  ASSERT_NE(cache_file(), "");
  // A poisoned cache: a thousandth of what the host copies.
  const double poisoned = first.bandwidth_bytes_per_s / 1000;
  set_cached_bandwidth(poisoned);
  EXPECT_DOUBLE_EQ(get(CeilingsMode::kUseCache).bandwidth_bytes_per_s, poisoned);
  const Ceilings kept = get(CeilingsMode::kKeepHigher);
  EXPECT_GT(kept.bandwidth_bytes_per_s, 100 * poisoned);
  EXPECT_DOUBLE_EQ(cached_bandwidth(), kept.bandwidth_bytes_per_s);
  // A cache higher than a new measurement stays (the floor is never made stricter).
  const double high = kept.bandwidth_bytes_per_s * 1000;
  set_cached_bandwidth(high);
  EXPECT_DOUBLE_EQ(get(CeilingsMode::kKeepHigher).bandwidth_bytes_per_s, high);
  // --remeasure replaces it.
  EXPECT_LT(get(CeilingsMode::kReplace).bandwidth_bytes_per_s, high);
  EXPECT_LT(cached_bandwidth(), high);
}

TEST_F(CeilingsTest, UnderAnInjectedCudaToolNothingMeasuredIsCached) {
  setenv("CUDA_INJECTION64_PATH", "/opt/some/profiler/injection.so", 1);
  const Ceilings measured = get(CeilingsMode::kKeepHigher);
  EXPECT_GT(measured.bandwidth_bytes_per_s, 1e8);
  EXPECT_EQ(cache_file(), "") << "a measurement under a profiler was cached";
  // With a cache, a tool-injected process uses it as it is.
  unsetenv("CUDA_INJECTION64_PATH");
  get(CeilingsMode::kUseCache);
  set_cached_bandwidth(12345.0);
  setenv("CUDA_INJECTION64_PATH", "/opt/some/profiler/injection.so", 1);
  EXPECT_DOUBLE_EQ(get(CeilingsMode::kKeepHigher).bandwidth_bytes_per_s, 12345.0);
  EXPECT_DOUBLE_EQ(cached_bandwidth(), 12345.0);
}

TEST_F(CeilingsTest, TheHostFigureIsMeasuredOnceThenReadFromItsCache) {
  const Ceilings first = get(CeilingsMode::kUseCache);
  EXPECT_TRUE(first.measured);
  EXPECT_EQ(first.arch, "cpu");
  // One core copying an L1-resident buffer: more than 1 GB/s on anything that runs kiln, and far
  // below 20 TB/s (about 64 bytes a cycle at 5 GHz is 320 GB/s; a figure near 20 TB/s would mean
  // the probe's passes were optimised away).
  EXPECT_GT(first.bandwidth_bytes_per_s, 1e9);
  EXPECT_LT(first.bandwidth_bytes_per_s, 2e13);
  EXPECT_LT(first.measure_s, 30.0);
  EXPECT_EQ(first.matrix_flops_per_s, 0);
  EXPECT_EQ(first.attainable_flops_per_s, 0) << "the attainable GEMM is a GPU figure";
  ASSERT_NE(cache_file(), "");
  EXPECT_EQ(first.cache_file, cache_file());
  // Keyed per CPU model and host.
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  std::string key;
  for (const char* p = host; *p; ++p)
    key += std::isalnum(static_cast<unsigned char>(*p)) ? *p : '_';
  EXPECT_NE(fs::path(cache_file()).filename().string().find(key), std::string::npos)
      << cache_file();
  const auto written = fs::last_write_time(cache_file());

  // The second call reads the cache: nothing measured, the file untouched, the same figure.
  const Ceilings second = get(CeilingsMode::kUseCache);
  EXPECT_FALSE(second.measured);
  EXPECT_DOUBLE_EQ(second.bandwidth_bytes_per_s, first.bandwidth_bytes_per_s);
  EXPECT_EQ(fs::last_write_time(cache_file()), written);
  EXPECT_NE(ceilings_line(second).find("cached in " + cache_file()), std::string::npos)
      << ceilings_line(second);
  EXPECT_NE(ceilings_line(first).find("measured now"), std::string::npos) << ceilings_line(first);

  // The floor check gets the margin on a host, and the bare figure on a GPU.
  EXPECT_DOUBLE_EQ(floor_bandwidth(second), kHostFloorMargin * second.bandwidth_bytes_per_s);
  Ceilings gpu = second;
  gpu.arch = "sm_90a";
  EXPECT_DOUBLE_EQ(floor_bandwidth(gpu), gpu.bandwidth_bytes_per_s);
  EXPECT_EQ(ceilings_line(gpu).rfind("device ceilings: copy ", 0), 0u) << ceilings_line(gpu);
}

TEST_F(CeilingsTest, AHostCacheFromAnotherProbeIsMeasuredAgain) {
  get(CeilingsMode::kUseCache);
  // A file without the probe's name (an older probe: a 128 MiB copy, a far lower figure that
  // would make the floor stricter than the L1 copy it now stands for).
  const std::string f = cache_file();
  std::ifstream in(f);
  nlohmann::json j = nlohmann::json::parse(in);
  in.close();
  j.erase("probe");
  j["bandwidth_bytes_per_s"] = 1e9;
  std::ofstream(f) << j.dump();
  const Ceilings again = get(CeilingsMode::kUseCache);
  EXPECT_TRUE(again.measured);
  EXPECT_GT(again.bandwidth_bytes_per_s, 1e9);
  EXPECT_GT(cached_bandwidth(), 1e9);
}

TEST(AttainableGemm, RunsFromSm80WithTheSharedMemoryEachArchAllows) {
  EXPECT_FALSE(attainable_gemm_applies("cpu"));
  EXPECT_FALSE(attainable_gemm_applies("sm_75"));
  EXPECT_TRUE(attainable_gemm_applies("sm_80"));
  EXPECT_TRUE(attainable_gemm_applies("sm_89"));
  EXPECT_TRUE(attainable_gemm_applies("sm_90a"));
  EXPECT_TRUE(attainable_gemm_applies("sm_100a"));
  // Three 48 KiB stages where a block may have 227 KiB (H100) or 163 KiB (A100); two where it may
  // have 99 KiB (sm_86, sm_89, sm_120).
  EXPECT_EQ(attainable_gemm_shared_bytes("sm_90a"), 3u * 48 * 1024);
  EXPECT_EQ(attainable_gemm_shared_bytes("sm_80"), 3u * 48 * 1024);
  EXPECT_EQ(attainable_gemm_shared_bytes("sm_100a"), 3u * 48 * 1024);
  EXPECT_EQ(attainable_gemm_shared_bytes("sm_89"), 2u * 48 * 1024);
  EXPECT_EQ(attainable_gemm_shared_bytes("sm_120a"), 2u * 48 * 1024);
  EXPECT_LE(attainable_gemm_shared_bytes("sm_89"), 99u * 1024);
  EXPECT_EQ(attainable_gemm_request("sm_90a").defines.at("KILN_GEMM_STAGES"), "3");
  EXPECT_EQ(attainable_gemm_request("sm_89").defines.at("KILN_GEMM_STAGES"), "2");
  // 4096 is a whole number of tiles each way.
  EXPECT_EQ(kAttainableGemmSize % kAttainableGemmTileM, 0);
  EXPECT_EQ(kAttainableGemmSize % kAttainableGemmTileN, 0);
  EXPECT_EQ(kAttainableGemmSize % kAttainableGemmTileK, 0);
}

TEST(AttainableGemm, TheKernelCompilesWithNvrtcForEachArchItRunsOn) {
  auto loaded = cuda::NvrtcCompiler::load();
  if (!loaded.is_ok()) GTEST_SKIP() << "libnvrtc cannot be loaded: " << loaded.status().to_string();
  for (const char* arch : {"sm_90a", "sm_80", "sm_89"}) {
    const CompileRequest req = attainable_gemm_request(arch);
    EXPECT_EQ(req.kernel_name, "kiln_gemm");
    const CompileOutput out = (*loaded)->compile(req);
    ASSERT_TRUE(out.ok) << arch << ":\n" << out.log;
    ASSERT_GE(out.binary.size(), 4u);
    EXPECT_EQ(out.binary.substr(0, 4), std::string("\x7f"
                                                   "ELF"))
        << arch;
  }
}

TEST(AttainableGemm, TheCeilingsLineReportsItAfterTheFiguresReadBack) {
  Ceilings c;
  c.arch = "sm_90a";
  c.bandwidth_bytes_per_s = 3.35e12;
  c.matrix_flops_per_s = 958e12;
  c.attainable_flops_per_s = 520e12;
  const std::string line = ceilings_line(c);
  EXPECT_EQ(line,
            "device ceilings: copy 3.35 TB/s, f16 tensor cores 958 TFLOP/s, f16 GEMM attains "
            "520 TFLOP/s");
  // bench/search_replay.cc's reading of it.
  double tbs = 0, tflops = 0;
  EXPECT_EQ(
      std::sscanf(line.c_str(), "device ceilings: copy %lf TB/s, f16 tensor cores %lf TFLOP/s",
                  &tbs, &tflops),
      2);
  EXPECT_DOUBLE_EQ(tflops, 958);
  // Where the issue-rate probe does not run (before sm_90a) the attainable figure stands alone.
  c.matrix_flops_per_s = 0;
  EXPECT_EQ(ceilings_line(c), "device ceilings: copy 3.35 TB/s, f16 GEMM attains 520 TFLOP/s");
  c.attainable_flops_per_s = 0;
  EXPECT_EQ(ceilings_line(c), "device ceilings: copy 3.35 TB/s");
}

}  // namespace
}  // namespace kiln::eval
