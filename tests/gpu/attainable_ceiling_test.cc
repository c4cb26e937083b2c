// The attainable GEMM ceiling on a real GPU (ctest label gpu). Two things:
//  1. kiln's own f16 GEMM (ceilings.cc, attainable_gemm_request) computes the right product: every
//     element of a small problem, launched directly through CudaDevice, against a host reference
//     from the same f16 inputs. A failure here prints the first wrong elements; a wrong kernel
//     never reports a rate (the measurement checks 64 elements too), so 2 would also fail.
//  2. load_or_measure_ceilings on this GPU carries an attainable rate: positive, below the
//     tensor-core issue-rate probe (the impossibility floor: a real GEMM beating it means the
//     probe understates the device), on an H100/H200 within 150-1000 TFLOP/s, measured in well
//     under 2 s, cached, and re-measured where an older cache file lacks it. It prints what it
//     measured: "attainable GEMM on <device>: N TFLOP/s (x% of the issue-rate probe)".
// Run: build-dir/tests/kiln_gpu_tests --gtest_filter='AttainableGemm*'. Skips without a GPU; on
// a GPU before sm_80 the figure must be 0.
#include <gtest/gtest.h>

#ifdef KILN_HAVE_CUDA

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "evaluator/ceilings.h"
#include "evaluator/cuda/cuda_device.h"
#include "evaluator/cuda/cuda_probe.h"
#include "evaluator/cuda/driver_api.h"
#include "evaluator/cuda/nvrtc_compiler.h"
#include "evaluator/tensor_data.h"
#include "evaluator/toolchain.h"
#include "tests/support/test_env.h"

namespace kiln::eval {
namespace {

namespace fs = std::filesystem;

TEST(AttainableGemm, EveryElementOfASmallProductMatchesTheHost) {
  auto api = cuda::DriverApi::load();
  if (!api.is_ok()) GTEST_SKIP() << "no CUDA GPU: " << api.status().message();
  int count = 0;
  if (!KILN_CU(**api, cuDeviceGetCount, &count).is_ok() || count == 0) {
    GTEST_SKIP() << "no CUDA GPU: no device";
  }
  auto compiler = cuda::NvrtcCompiler::load();
  ASSERT_TRUE(compiler.is_ok()) << "a GPU but no NVRTC: " << compiler.status().to_string();
  auto opened = cuda::CudaDevice::open(**api, 0);
  ASSERT_TRUE(opened.is_ok()) << opened.status().to_string();
  std::unique_ptr<cuda::CudaDevice> device = std::move(opened).value();
  if (!attainable_gemm_applies(device->arch())) {
    GTEST_SKIP() << device->arch() << " is before sm_80: the attainable GEMM does not run there";
  }

  // 3 x 2 blocks, 9 K slices: more than the stages in the ring, so it wraps.
  const int64_t m = 3 * kAttainableGemmTileM, n = 2 * kAttainableGemmTileN,
                k = 9 * kAttainableGemmTileK;
  std::vector<double> a(m * k), b(n * k), ref(m * n);
  std::vector<uint16_t> a16(m * k), b16(n * k), c16(m * n, 0xFFFF);
  generate(Distribution::kNormal, DType::kF16, 11, a.size(), a.data(), a16.data());
  generate(Distribution::kNormal, DType::kF16, 12, b.size(), b.data(), b16.data());
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t kk = 0; kk < k; ++kk) s += a[i * k + kk] * b[j * k + kk];
      ref[i * n + j] = s;
    }
  }

  CompileOutput out = (*compiler)->compile(attainable_gemm_request(device->arch()));
  ASSERT_TRUE(out.ok) << out.log;
  auto kernel = device->load(out.binary, "kiln_gemm");
  ASSERT_TRUE(kernel.is_ok()) << kernel.status().to_string();
  auto da = device->alloc(a16.size() * 2), db = device->alloc(b16.size() * 2),
       dc = device->alloc(c16.size() * 2);
  ASSERT_TRUE(da.is_ok() && db.is_ok() && dc.is_ok());
  ASSERT_TRUE(device->copy_to_device(*da, a16.data(), a16.size() * 2).is_ok());
  ASSERT_TRUE(device->copy_to_device(*db, b16.data(), b16.size() * 2).is_ok());
  ASSERT_TRUE(device->fill(*dc, 0xFF, c16.size() * 2).is_ok());  // NaN: unwritten shows
  LaunchGeometry g;
  g.grid[0] = static_cast<uint32_t>(n / kAttainableGemmTileN);
  g.grid[1] = static_cast<uint32_t>(m / kAttainableGemmTileM);
  g.block[0] = kAttainableGemmThreads;
  g.shared_bytes = attainable_gemm_shared_bytes(device->arch());
  std::vector<KernelArg> args = {KernelArg::pointer(*da), KernelArg::pointer(*db),
                                 KernelArg::pointer(*dc), KernelArg::int64(m),
                                 KernelArg::int64(n),     KernelArg::int64(k)};
  Status launched = device->launch(*kernel, g, args);
  ASSERT_TRUE(launched.is_ok()) << launched.to_string();
  Status synced = device->synchronize();
  ASSERT_TRUE(synced.is_ok()) << "the GEMM faulted: " << synced.to_string();
  ASSERT_TRUE(device->copy_to_host(c16.data(), *dc, c16.size() * 2).is_ok());

  std::vector<double> c(m * n);
  decode(DType::kF16, c16.data(), c.size(), c.data());
  int64_t wrong = 0;
  double worst = 0;
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      const double r = ref[i * n + j], got = c[i * n + j];
      // f16 rounding of the output (2^-11 relative) and f32 accumulation over k = 576 terms of
      // about 1: a wrong element is off by about sqrt(k) = 24.
      const double err = std::abs(got - r);
      worst = std::isfinite(err) ? std::max(worst, err) : worst;
      if (!(err <= 0.05 + 2e-3 * std::abs(r)) && ++wrong <= 8) {
        ADD_FAILURE() << "C[" << i << "][" << j << "] = " << got << ", expected " << r
                      << " (block (" << j / kAttainableGemmTileN << ", " << i / kAttainableGemmTileM
                      << "), warp row " << (i % kAttainableGemmTileM) / 64 << " col "
                      << (j % kAttainableGemmTileN) / 64 << ", m16 tile " << (i % 64) / 16
                      << ", n8 tile " << (j % 64) / 8 << ")";
      }
    }
  }
  EXPECT_EQ(wrong, 0) << "of " << m * n << " elements of the attainable GEMM (ceilings.cc) are "
                      << "wrong; its rate must not be believed";
  std::printf("attainable GEMM %lldx%lldx%lld on %s: %lld wrong, worst abs error %.3g\n",
              static_cast<long long>(m), static_cast<long long>(n), static_cast<long long>(k),
              device->name().c_str(), static_cast<long long>(wrong), worst);
  EXPECT_TRUE(device->free(*da).is_ok());
  EXPECT_TRUE(device->free(*db).is_ok());
  EXPECT_TRUE(device->free(*dc).is_ok());
  EXPECT_TRUE(device->unload(*kernel).is_ok());
}

TEST(AttainableGemm, TheCeilingsCarryAPlausibleRateBelowTheIssueRateProbe) {
  cuda::CudaProbe p = cuda::probe_cuda();
  if (p.gpus.empty() || !p.nvrtc_loaded) {
    GTEST_SKIP() << "no CUDA GPU: " << p.driver_error << p.nvrtc_error;
  }
  unsetenv("CUDA_INJECTION64_PATH");
  testing::TempDir dir;
  auto tc = Toolchain::create("cuda", dir.path());
  ASSERT_TRUE(tc.is_ok()) << tc.status().to_string();
  SandboxOptions options;
  options.kiln_binary = testing::kiln_binary();
  options.backend = "cuda";
  auto measured =
      load_or_measure_ceilings(options, (*tc)->compiler(), dir.path(), CeilingsMode::kReplace);
  ASSERT_TRUE(measured.is_ok()) << measured.status().to_string();
  const Ceilings c = *measured;
  std::printf("%s\n", ceilings_line(c).c_str());
  if (!attainable_gemm_applies(c.arch)) {
    EXPECT_EQ(c.attainable_flops_per_s, 0) << c.arch << " is before sm_80";
    return;
  }
  ASSERT_GT(c.attainable_flops_per_s, 0)
      << "no attainable rate on " << c.device << " (" << c.arch << "): " << c.attainable_error;
  EXPECT_TRUE(c.attainable_error.empty()) << c.attainable_error;
  if (c.matrix_flops_per_s > 0) {
    // Equal means ceilings.cc raised the probe's figure to the GEMM's: the GEMM beat it.
    EXPECT_LT(c.attainable_flops_per_s, c.matrix_flops_per_s)
        << "a real GEMM was as fast as the tensor-core issue-rate probe: the probe understates "
           "the device (THREATS row 9)";
  }
  std::printf("attainable GEMM on %s: %.0f TFLOP/s (%.0f%% of the issue-rate probe's %.0f)\n",
              c.device.c_str(), c.attainable_flops_per_s / 1e12,
              c.matrix_flops_per_s > 0 ? 100 * c.attainable_flops_per_s / c.matrix_flops_per_s : 0,
              c.matrix_flops_per_s / 1e12);
  if (c.device.find("H100") != std::string::npos || c.device.find("H200") != std::string::npos) {
    // cuBLAS reaches ~710-760 TFLOP/s at 4096^3 on an H100; the probe ~840-960.
    EXPECT_GT(c.attainable_flops_per_s, 150e12) << "far below what an mma.sync GEMM reaches";
    EXPECT_LT(c.attainable_flops_per_s, 1000e12) << "above the H100/H200's dense f16 peak";
  }
  EXPECT_NE(ceilings_line(c).find(", f16 GEMM attains "), std::string::npos) << ceilings_line(c);

  // Cached with its GEMM's name and how long it took (well under 2 s, compile included).
  ASSERT_FALSE(c.cache_file.empty());
  std::ifstream in(c.cache_file);
  nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  in.close();
  ASSERT_TRUE(j.is_object()) << c.cache_file;
  EXPECT_DOUBLE_EQ(j.value("attainable_flops_per_s", 0.0), c.attainable_flops_per_s);
  EXPECT_FALSE(j.value("attainable_probe", "").empty()) << j.dump();
  EXPECT_LT(j.value("attainable_measure_s", 99.0), 2.0) << j.dump();
  auto again = load_or_measure_ceilings(options, (*tc)->compiler(), dir.path());
  ASSERT_TRUE(again.is_ok()) << again.status().to_string();
  EXPECT_FALSE(again->measured);
  EXPECT_DOUBLE_EQ(again->attainable_flops_per_s, c.attainable_flops_per_s);

  // A file from before the attainable figure is measured again, not used without it.
  j.erase("attainable_probe");
  j.erase("attainable_flops_per_s");
  std::ofstream(c.cache_file) << j.dump();
  auto old = load_or_measure_ceilings(options, (*tc)->compiler(), dir.path());
  ASSERT_TRUE(old.is_ok()) << old.status().to_string();
  EXPECT_TRUE(old->measured);
  EXPECT_GT(old->attainable_flops_per_s, 0) << old->attainable_error;
}

}  // namespace
}  // namespace kiln::eval

#else

TEST(AttainableGemm, NeedsCudaHeaders) {
  GTEST_SKIP() << "no CUDA GPU: built without CUDA headers";
}

#endif
