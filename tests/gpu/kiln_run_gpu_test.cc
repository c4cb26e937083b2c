// `kiln run` on a real GPU (ctest label gpu): the whole farm path — private redis-server, the
// coordinator, one `kiln evaluator --backend cuda` process, the built-in proposer — on one small
// memory-bound target. It checks what only the cuda path exercises: every verified result carries
// its physical floor (the evaluator measures the device's ceilings at start), the summary reports
// a fraction of the floor that is possible (not above 1.03: faster than the floor is rejected),
// and the search beats the seed. Skips without a usable GPU.
#include <gtest/gtest.h>

#ifdef KILN_HAVE_CUDA

#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "evaluator/cuda/cuda_probe.h"
#include "tests/support/cheat_cases.h"
#include "tests/support/test_env.h"

namespace kiln {
namespace {

TEST(KilnRunGpu, ReduceOnOneGpuBeatsItsSeedAndReportsItsFloor) {
  cuda::CudaProbe p = cuda::probe_cuda();
  if (p.gpus.empty() || !p.nvrtc_loaded) GTEST_SKIP() << "no CUDA GPU: " << p.driver_error << p.nvrtc_error;
  testing::TempDir dir;
  const std::string out = dir.path() + "/run";
  std::string output;
  const std::string cmd = testing::kiln_binary() + " run --targets reduce --backend cuda --gpus 0" +
                          " --budget 45s --patience 12 --out " + out + " --cache-dir " + dir.path() +
                          "/cache --targets-dir " + testing::source_root() + "/targets 2>&1";
  ASSERT_EQ(testing::run_command(cmd, &output), 0) << output;

  std::ifstream in(out + "/summary.json");
  nlohmann::json summary = nlohmann::json::parse(in, nullptr, false);
  ASSERT_TRUE(summary.is_array() && summary.size() == 1) << output;
  const nlohmann::json& t = summary[0];
  EXPECT_GT(t["evaluations"].get<int>(), 2) << t.dump();
  EXPECT_EQ(t["failures"].get<int>(), 0) << t.dump();
  EXPECT_LT(t["best_us"].get<double>(), t["seed_us"].get<double>()) << t.dump();
  EXPECT_GT(t["fraction_of_floor"].get<double>(), 0.05) << t.dump();
  EXPECT_LE(t["fraction_of_floor"].get<double>(), 1.03) << t.dump();

  // Every verified result in results.jsonl has its floor.
  std::ifstream lines(out + "/results.jsonl");
  std::string line;
  int verified = 0;
  while (std::getline(lines, line)) {
    nlohmann::json r = nlohmann::json::parse(line, nullptr, false);
    if (r.value("outcome", "") != "verified") continue;
    ++verified;
    EXPECT_GT(r["metrics"].value("floor_us", 0.0), 0.0) << line.substr(0, 300);
  }
  EXPECT_GT(verified, 2);
}

}  // namespace
}  // namespace kiln

#else

TEST(KilnRunGpu, NeedsCudaHeaders) { GTEST_SKIP() << "no CUDA GPU: built without CUDA headers"; }

#endif
