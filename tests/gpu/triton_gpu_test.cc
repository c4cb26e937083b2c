// The triton backend on a real GPU (ctest label gpu): a Triton kernel compiled by TritonCompiler
// and loaded by CudaDevice as a triton binary (its cubin's entry point, the scratch pointers
// Triton appends passed as null, its shared memory, a block checked against its warps), then every
// built-in target's Triton seed and template through `kiln eval --backend triton`: verified and
// timed like the cuda kernels. Skips without a GPU, NVRTC or Triton.
#include <gtest/gtest.h>

#ifdef KILN_HAVE_CUDA

#include <cmath>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "evaluator/cuda/cuda_device.h"
#include "evaluator/cuda/cuda_probe.h"
#include "evaluator/cuda/driver_api.h"
#include "evaluator/evaluation.h"
#include "evaluator/triton/triton_binary.h"
#include "evaluator/triton/triton_compiler.h"
#include "shared/target_spec.h"
#include "tests/support/cheat_cases.h"
#include "tests/support/test_env.h"
#include "tests/support/triton_add_kernel.h"

namespace kiln {
namespace {

class TritonGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    cuda::CudaProbe p = cuda::probe_cuda();
    if (p.gpus.empty() || !p.nvrtc_loaded) {
      GTEST_SKIP() << "no CUDA GPU: " << p.driver_error << p.nvrtc_error;
    }
    arch_ = p.gpus[0].arch();
    eval::TritonCompilerOptions options;
    options.cache_dir = dir_.file("triton-cache");
    auto compiler = eval::TritonCompiler::create(options);
    if (!compiler.is_ok()) GTEST_SKIP() << "no Triton: " << compiler.status().message();
    compiler_ = std::move(compiler).value();
  }
  testing::TempDir dir_;
  std::string arch_;
  std::unique_ptr<eval::TritonCompiler> compiler_;
};

eval::LaunchGeometry blocks_of(uint32_t blocks, uint32_t threads) {
  eval::LaunchGeometry g;
  g.grid[0] = blocks;
  g.block[0] = threads;
  return g;
}

TEST_F(TritonGpu, ATritonBinaryLaunchesWithItsHiddenArgumentsAndOnlyWithItsWarps) {
  eval::CompileRequest req;
  req.source = testing::kTritonAddKernel;
  req.kernel_name = "add";
  req.arch = arch_;
  req.signature = testing::triton_add_signature(DType::kF32);
  req.defines = {{"BLOCK", "1024"}, {"num_warps", "8"}};
  eval::CompileOutput out = compiler_->compile(req);
  ASSERT_TRUE(out.ok) << out.log;
  ASSERT_TRUE(eval::is_triton_binary(out.binary));

  auto api = cuda::DriverApi::load();
  ASSERT_TRUE(api.is_ok()) << api.status().to_string();
  auto device = cuda::CudaDevice::open(**api, 0);
  ASSERT_TRUE(device.is_ok()) << device.status().to_string();
  cuda::CudaDevice& d = **device;
  // The name passed is not the entry point's: a triton binary names its own.
  Result<eval::KernelHandle> k = d.load(out.binary, "whatever the spec says");
  ASSERT_TRUE(k.is_ok()) << k.status().to_string();

  const long long n = 5000;  // not a multiple of BLOCK: the mask matters
  std::vector<float> x(n), y(n), z(n, -1);
  for (long long i = 0; i < n; ++i) x[i] = static_cast<float>(i), y[i] = 0.5f * static_cast<float>(i);
  void* dx = *d.alloc(n * 4);
  void* dy = *d.alloc(n * 4);
  void* dz = *d.alloc(n * 4);
  ASSERT_TRUE(d.copy_to_device(dx, x.data(), n * 4).is_ok());
  ASSERT_TRUE(d.copy_to_device(dy, y.data(), n * 4).is_ok());
  ASSERT_TRUE(d.fill(dz, 0xFF, n * 4).is_ok());
  const std::vector<eval::KernelArg> args = {
      eval::KernelArg::pointer(dx), eval::KernelArg::pointer(dy), eval::KernelArg::pointer(dz),
      eval::KernelArg::int64(n)};
  const uint32_t programs = static_cast<uint32_t>((n + 1023) / 1024);

  // 8 warps were compiled: a block of 128 threads is refused before anything runs.
  Status wrong = d.launch(*k, blocks_of(programs, 128), args);
  EXPECT_FALSE(wrong.is_ok());
  EXPECT_NE(wrong.message().find("8 warps"), std::string::npos) << wrong.message();
  // One argument short is the caller's mistake, not a hidden parameter.
  Status short_args =
      d.launch(*k, blocks_of(programs, 256), {args.begin(), args.begin() + 3});
  EXPECT_FALSE(short_args.is_ok());

  ASSERT_TRUE(d.launch(*k, blocks_of(programs, 256), args).is_ok());
  ASSERT_TRUE(d.synchronize().is_ok());
  ASSERT_TRUE(d.copy_to_host(z.data(), dz, n * 4).is_ok());
  for (long long i = 0; i < n; ++i) ASSERT_EQ(z[i], 1.5f * static_cast<float>(i)) << i;

  // The binary holds a variant for arguments that are multiples of 16: N = 4096 with aligned
  // buffers runs it (16-byte loads); the same N with x one element past an aligned address must
  // not (a 16-byte load there is a misaligned access, a sticky error): the generic cubin runs.
  ASSERT_TRUE(eval::decode_triton_binary(out.binary)->divisible.has_value());
  const long long n16 = 4096;
  for (int shift : {0, 1}) {
    SCOPED_TRACE("x shifted by " + std::to_string(shift) + " element(s)");
    ASSERT_TRUE(d.fill(dz, 0xFF, n * 4).is_ok());
    void* x_at = static_cast<float*>(dx) + shift;
    const std::vector<eval::KernelArg> aligned = {
        eval::KernelArg::pointer(x_at), eval::KernelArg::pointer(dy), eval::KernelArg::pointer(dz),
        eval::KernelArg::int64(n16)};
    ASSERT_TRUE(d.launch(*k, blocks_of(n16 / 1024, 256), aligned).is_ok());
    ASSERT_TRUE(d.synchronize().is_ok());
    ASSERT_TRUE(d.copy_to_host(z.data(), dz, n * 4).is_ok());
    for (long long i = 0; i < n16; ++i) {
      ASSERT_EQ(z[i], static_cast<float>(i + shift) + 0.5f * static_cast<float>(i)) << i;
    }
    for (long long i = n16; i < n; ++i) ASSERT_TRUE(std::isnan(z[i])) << i << ": past N";
  }
  EXPECT_TRUE(d.unload(*k).is_ok());
}

// Every built-in target's Triton seed and template (its first configuration) verify and time
// through `kiln eval --backend triton`, as the cuda kernels do.
TEST_F(TritonGpu, EveryBuiltInTritonSeedAndTemplateVerifiesThroughKilnEval) {
  Result<std::vector<TargetSpec>> targets = load_targets(testing::builtin_targets_dir());
  ASSERT_TRUE(targets.is_ok()) << targets.status().to_string();
  int evaluated = 0;
  for (const TargetSpec& t : *targets) {
    const BackendSpec* b = t.backend("triton");
    if (!b) continue;
    for (const char* which : {"", " --template"}) {
      if (*which && !b->tunable) continue;
      SCOPED_TRACE(t.name + which);
      const std::string out = dir_.file(t.name + "-result.json");
      const std::string log = dir_.file(t.name + "-progress.txt");
      const std::string cmd = "(" + testing::kiln_binary() + " eval " + t.name + which +
                              " --backend triton --json --cache-dir " + dir_.path() +
                              " --targets-dir " + testing::source_root() + "/targets > " + out +
                              " 2> " + log + ")";
      std::string ignored;
      const int rc = testing::run_command(cmd, &ignored);
      nlohmann::json r = nlohmann::json::parse(testing::read_file(out), nullptr, false);
      ASSERT_FALSE(r.is_discarded()) << cmd << "\n" << testing::read_file(log);
      EXPECT_EQ(rc, 0) << testing::read_file(log);
      EXPECT_EQ(r.value("outcome", ""), "verified")
          << r.value("log", "") << "\n"
          << testing::read_file(log);
      EXPECT_GT(r.value("timing", nlohmann::json::object()).value("median_us", 0.0), 0.0)
          << r.dump();
      ++evaluated;
    }
  }
  EXPECT_GE(evaluated, 8);
}

}  // namespace
}  // namespace kiln

#endif  // KILN_HAVE_CUDA
