// Tensor maps on a real GPU (ctest label gpu): a target whose kernel loads its input with TMA
// through a map kiln encodes (target.json "tensor_maps") verifies through all five stages in
// every dtype -- the map follows each input set and poisoned copy to its address -- and takes its
// plain-load path where rows are not 16-byte aligned (kiln passes zeros there). A kernel that
// uses the map at such a shape anyway fails as a crash, and the evaluator goes on. The exported
// launcher (which encodes the map itself) is built with nvcc and run. Skips without a GPU.
#include <gtest/gtest.h>

#ifdef KILN_HAVE_CUDA

#include <deque>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "evaluator/cuda/cuda_probe.h"
#include "tests/support/test_env.h"
#include "tests/support/tma_target.h"

namespace kiln {
namespace {

class TensorMapGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    cuda::CudaProbe p = cuda::probe_cuda();
    if (p.gpus.empty() || !p.nvrtc_loaded) {
      GTEST_SKIP() << "no CUDA GPU: " << p.driver_error << p.nvrtc_error;
    }
    if (p.gpus[0].cc_major < 9) GTEST_SKIP() << "TMA needs sm_90 or later";
  }

  // `kiln eval tma_scale` over the target written with `always_tma` -> the result JSON.
  nlohmann::json eval(int always_tma, const std::string& dtype, std::string* progress) {
    testing::TempDir& dir = dirs_.emplace_back();
    testing::write_tma_scale_target(dir.file("targets/tma_scale"), always_tma);
    const std::string out = dir.file("result.json"), log = dir.file("progress.txt");
    const std::string cmd = "(" + testing::kiln_binary() +
                            " eval tma_scale --backend cuda --json --dtype " + dtype +
                            " --cache-dir " + dir.file("cache") + " --targets-dir " +
                            dir.file("targets") + " > " + out + " 2> " + log + ")";
    std::string ignored;
    testing::run_command(cmd, &ignored);
    *progress = testing::read_file(log);
    nlohmann::json r = nlohmann::json::parse(testing::read_file(out), nullptr, false);
    return r.is_discarded() ? nlohmann::json::object() : r;
  }
  std::deque<testing::TempDir> dirs_;  // deque: a TempDir cannot move
};

TEST_F(TensorMapGpu, ATmaKernelVerifiesInEveryDtypeAndFallsBackWhereRowsAreUnaligned) {
  for (const char* dtype : {"f16", "bf16", "f32"}) {
    std::string progress;
    nlohmann::json r = eval(0, dtype, &progress);
    EXPECT_EQ(r.value("outcome", ""), "verified") << dtype << ": " << r.value("log", "") << "\n"
                                                  << progress;
    EXPECT_GT(r["timing"].value("median_us", 0.0), 0.0) << dtype;
  }
}

TEST_F(TensorMapGpu, AKernelUsingTheZeroMapOfAnUnalignedShapeCrashesAndTheEvaluatorSaysWhere) {
  std::string progress;
  nlohmann::json r = eval(1, "f16", &progress);
  ASSERT_TRUE(r.contains("outcome") && r.contains("stages")) << progress;
  EXPECT_NE(r["outcome"], "verified") << progress;
  // The aligned smoke shape passes; an unaligned edge shape is where the zero map is used.
  ASSERT_FALSE(r["stages"].empty()) << r.dump();
  bool smoke_passed = false;
  for (const auto& s : r["stages"])
    smoke_passed |= s.value("name", "") == "smoke" && s.value("passed", false);
  EXPECT_TRUE(smoke_passed) << r["stages"].dump();
  EXPECT_FALSE(r["stages"].back().value("passed", true)) << r["stages"].dump();
}

// The exported launcher (kiln export: C++ with the map encoded by the launcher) built with nvcc and
// launched here: y = 2 x exactly at aligned shapes (the map) and unaligned ones (the fallback).
TEST_F(TensorMapGpu, AnExportedLauncherEncodesTheMapAndComputesAtAlignedAndUnalignedShapes) {
  std::string out;
  if (testing::run_command("command -v nvcc || test -x /usr/local/cuda/bin/nvcc", &out) != 0)
    GTEST_SKIP() << "no nvcc here to build the export";
  testing::TempDir dir;
  testing::write_tma_scale_target(dir.file("targets/tma_scale"), 0);
  const std::string to = dir.file("export");
  // Verified here first (the GPU is present), then written.
  ASSERT_EQ(
      testing::run_command(testing::kiln_binary() + " export tma_scale --seed --targets-dir " +
                               dir.file("targets") + " --to " + to + " 2>&1",
                           &out),
      0)
      << out;
  std::ofstream(to + "/driver.cu") << R"(#include <cstdio>
#include <vector>
#include "tma_scale.cuh"
int main() {
  const long long shapes[][2] = {{64, 128}, {7, 13}, {33, 520}, {300, 4096}, {5, 4099}};
  for (const auto& s : shapes) {
    const long long M = s[0], N = s[1], n = M * N;
    std::vector<__half> x(n), y(n);
    for (long long i = 0; i < n; ++i) x[i] = __float2half(0.5f * static_cast<float>(i % 97));
    __half *dx = nullptr, *dy = nullptr;
    cudaMalloc(&dx, n * sizeof(__half));
    cudaMalloc(&dy, n * sizeof(__half));
    cudaMemcpy(dx, x.data(), n * sizeof(__half), cudaMemcpyHostToDevice);
    std::string why;
    cudaError_t e = kiln_tma_scale::launch(dx, dy, M, N, 0, &why);
    if (e == cudaSuccess) e = cudaDeviceSynchronize();
    if (e != cudaSuccess) {
      std::printf("error %lld %lld %s %s\n", M, N, cudaGetErrorString(e), why.c_str());
      return 1;
    }
    cudaMemcpy(y.data(), dy, n * sizeof(__half), cudaMemcpyDeviceToHost);
    long long bad = 0;
    for (long long i = 0; i < n; ++i) bad += __half2float(y[i]) != 2.f * __half2float(x[i]);
    std::printf("%lld %lld %lld\n", M, N, bad);
    cudaFree(dx);
    cudaFree(dy);
  }
  return 0;
}
)";
  const std::string nvcc = "$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)";
  ASSERT_EQ(testing::run_command("cd " + to + " && " + nvcc +
                                     " -std=c++17 -gencode arch=compute_90a,code=sm_90a -o driver "
                                     "driver.cu tma_scale.cu 2>&1",
                                 &out),
            0)
      << out;
  ASSERT_EQ(testing::run_command(to + "/driver 2>&1", &out), 0) << out;
  EXPECT_EQ(out, "64 128 0\n7 13 0\n33 520 0\n300 4096 0\n5 4099 0\n");
}

}  // namespace
}  // namespace kiln

#else

TEST(TensorMapGpu, NeedsCudaHeaders) { GTEST_SKIP() << "no CUDA GPU: built without CUDA headers"; }

#endif
