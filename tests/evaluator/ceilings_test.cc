// The ceilings cache on the cpu backend (the code path is the same for cuda; only the probe
// kernels differ): a first measurement is cached, kUseCache returns the cache, kKeepHigher
// repairs a cache that holds a figure lower than the device really reaches (a measurement taken
// under a profiler or on a busy GPU: with it honest kernels would be rejected as faster than
// possible), kReplace replaces it, and under an injected CUDA tool nothing measured is cached.
#include "evaluator/ceilings.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

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

}  // namespace
}  // namespace kiln::eval
