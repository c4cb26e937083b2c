// Tests of CudaDevice on a real GPU (ctest label gpu): kernels compiled by NvrtcCompiler, loaded,
// launched, timed and faulted. Without a driver or a device every test skips with "no CUDA GPU".
#include <gtest/gtest.h>

#ifdef KILN_HAVE_CUDA

#include <cmath>
#include <cstdio>
#include <vector>

#include "evaluator/cuda/cuda_device.h"
#include "evaluator/cuda/driver_api.h"
#include "evaluator/cuda/nvrtc_compiler.h"

namespace kiln::cuda {
namespace {

using eval::KernelArg;
using eval::KernelHandle;
using eval::LaunchGeometry;

TEST(ArchForComputeCapability, UsesArchSpecificTargetsForHopperAndBlackwell) {
  EXPECT_EQ(arch_for_compute_capability(9, 0), "sm_90a");
  EXPECT_EQ(arch_for_compute_capability(10, 0), "sm_100a");
  EXPECT_EQ(arch_for_compute_capability(8, 9), "sm_89");
  EXPECT_EQ(arch_for_compute_capability(8, 0), "sm_80");
}

constexpr const char* kSaxpy = R"(
extern "C" __global__ void saxpy(const float* x, float* y, long long n, float a) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) y[i] = fmaf(a, x[i], y[i]);
}
)";

LaunchGeometry geometry_1d(uint32_t blocks, uint32_t threads, uint32_t shared_bytes = 0) {
  LaunchGeometry g;
  g.grid[0] = blocks;
  g.block[0] = threads;
  g.shared_bytes = shared_bytes;
  return g;
}

class CudaDeviceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto api = DriverApi::load();
    if (!api.is_ok()) GTEST_SKIP() << "no CUDA GPU: " << api.status().message();
    api_ = std::move(api).value();
    int count = 0;
    Status counted = KILN_CU(*api_, cuDeviceGetCount, &count);
    if (!counted.is_ok() || count == 0) {
      GTEST_SKIP() << "no CUDA GPU: " << (counted.is_ok() ? "no device" : counted.message());
    }
    auto compiler = NvrtcCompiler::load();
    ASSERT_TRUE(compiler.is_ok()) << "a GPU but no NVRTC: " << compiler.status().to_string();
    compiler_ = std::move(compiler).value();
    auto device = CudaDevice::open(*api_, 0);
    ASSERT_TRUE(device.is_ok()) << device.status().to_string();
    device_ = std::move(device).value();
  }

  // Compiles for this device's arch and loads; fails the test on any error.
  KernelHandle build(const char* source, const std::string& kernel_name) {
    eval::CompileRequest r;
    r.source = source;
    r.kernel_name = kernel_name;
    r.arch = device_->arch();
    eval::CompileOutput out = compiler_->compile(r);
    EXPECT_TRUE(out.ok) << out.log;
    auto kernel = device_->load(out.binary, kernel_name);
    EXPECT_TRUE(kernel.is_ok()) << kernel.status().to_string();
    return kernel.value_or(0);
  }

  void* alloc(size_t bytes) {
    auto p = device_->alloc(bytes);
    EXPECT_TRUE(p.is_ok()) << p.status().to_string();
    return p.value_or(nullptr);
  }

  // Declaration order matters: the device dies before the driver table it points at.
  std::unique_ptr<DriverApi> api_;
  std::unique_ptr<NvrtcCompiler> compiler_;
  std::unique_ptr<CudaDevice> device_;
};

TEST_F(CudaDeviceTest, ReportsNameArchAndL2Size) {
  EXPECT_FALSE(device_->name().empty());
  EXPECT_EQ(device_->arch().rfind("sm_", 0), 0u) << device_->arch();
  EXPECT_GT(device_->l2_cache_bytes(), 0);
  EXPECT_EQ(device_->backend(), "cuda");
  EXPECT_GE(device_->sm_clock_mhz(), 0);  // 0 when NVML is absent
  std::printf("device: %s (%s), L2 %d bytes, SM clock %d MHz, driver %d\n",
              device_->name().c_str(), device_->arch().c_str(), device_->l2_cache_bytes(),
              device_->sm_clock_mhz(), api_->driver_version());
}

TEST_F(CudaDeviceTest, SaxpyMatchesHostReferenceElementByElement) {
  KernelHandle saxpy = build(kSaxpy, "saxpy");
  const int64_t n = (1 << 20) + 3;  // not a multiple of the block size
  const float a = 1.75f;
  std::vector<float> x(n), y(n), expected(n), result(n, -1.0f);
  for (int64_t i = 0; i < n; ++i) {
    x[i] = static_cast<float>(i % 1000) * 0.25f - 7.0f;
    y[i] = static_cast<float>(i % 37) * -0.5f + 3.0f;
    expected[i] = std::fma(a, x[i], y[i]);
  }
  void* dx = alloc(n * sizeof(float));
  void* dy = alloc(n * sizeof(float));
  ASSERT_TRUE(device_->copy_to_device(dx, x.data(), n * sizeof(float)).is_ok());
  ASSERT_TRUE(device_->copy_to_device(dy, y.data(), n * sizeof(float)).is_ok());
  std::vector<KernelArg> args = {KernelArg::pointer(dx), KernelArg::pointer(dy),
                                 KernelArg::int64(n), KernelArg::float32(a)};
  Status launched = device_->launch(saxpy, geometry_1d((n + 255) / 256, 256), args);
  ASSERT_TRUE(launched.is_ok()) << launched.to_string();
  Status synced = device_->synchronize();
  ASSERT_TRUE(synced.is_ok()) << synced.to_string();
  ASSERT_TRUE(device_->copy_to_host(result.data(), dy, n * sizeof(float)).is_ok());
  int64_t mismatches = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (result[i] != expected[i] && ++mismatches <= 5) {
      ADD_FAILURE() << "y[" << i << "] = " << result[i] << ", expected " << expected[i];
    }
  }
  EXPECT_EQ(mismatches, 0);
  EXPECT_TRUE(device_->free(dx).is_ok());
  EXPECT_TRUE(device_->free(dy).is_ok());
  EXPECT_TRUE(device_->unload(saxpy).is_ok());
}

TEST_F(CudaDeviceTest, TimeLaunchIsPositiveWithAndWithoutL2Flush) {
  KernelHandle saxpy = build(kSaxpy, "saxpy");
  const int64_t n = 1 << 24;
  void* dx = alloc(n * sizeof(float));
  void* dy = alloc(n * sizeof(float));
  ASSERT_TRUE(device_->fill(dx, 0, n * sizeof(float)).is_ok());
  ASSERT_TRUE(device_->fill(dy, 0, n * sizeof(float)).is_ok());
  std::vector<KernelArg> args = {KernelArg::pointer(dx), KernelArg::pointer(dy),
                                 KernelArg::int64(n), KernelArg::float32(2.0f)};
  for (bool flush : {false, true, true}) {
    Result<double> time_us = device_->time_launch(saxpy, geometry_1d(n / 256, 256), args, flush);
    ASSERT_TRUE(time_us.is_ok()) << time_us.status().to_string();
    EXPECT_GT(*time_us, 0.0) << "flush_l2=" << flush;
    std::printf("saxpy 2^24 floats, flush_l2=%d: %.2f us\n", flush, *time_us);
  }
}

TEST_F(CudaDeviceTest, LaunchesKernelWithMoreThan48KBOfDynamicSharedMemory) {
  const char* source = R"(
extern "C" __global__ void big_smem(float* out, long long count) {
  extern __shared__ float buffer[];
  for (long long i = threadIdx.x; i < count; i += blockDim.x) buffer[i] = 1.0f;
  __syncthreads();
  if (threadIdx.x == 0) {
    float sum = 0.0f;
    for (long long i = 0; i < count; ++i) sum += buffer[i];
    out[0] = sum;
  }
}
)";
  KernelHandle kernel = build(source, "big_smem");
  const uint32_t shared_bytes = 100 * 1024;
  const int64_t count = shared_bytes / sizeof(float);
  void* out = alloc(sizeof(float));
  std::vector<KernelArg> args = {KernelArg::pointer(out), KernelArg::int64(count)};
  Status launched = device_->launch(kernel, geometry_1d(1, 256, shared_bytes), args);
  ASSERT_TRUE(launched.is_ok()) << launched.to_string();
  ASSERT_TRUE(device_->synchronize().is_ok());
  float sum = 0;
  ASSERT_TRUE(device_->copy_to_host(&sum, out, sizeof(float)).is_ok());
  EXPECT_EQ(sum, static_cast<float>(count));
}

TEST_F(CudaDeviceTest, KernelRegistersAreReadable) {
  KernelHandle saxpy = build(kSaxpy, "saxpy");
  Result<KernelAttributes> attributes = device_->kernel_attributes(saxpy);
  ASSERT_TRUE(attributes.is_ok()) << attributes.status().to_string();
  EXPECT_GT(attributes->registers_per_thread, 0);
  EXPECT_GE(attributes->local_bytes_per_thread, 0);
  EXPECT_GT(attributes->max_threads_per_block, 0);
}

TEST_F(CudaDeviceTest, RejectsArgumentsThatDoNotMatchTheKernel) {
  KernelHandle saxpy = build(kSaxpy, "saxpy");
  void* dx = alloc(1024);
  std::vector<KernelArg> too_few = {KernelArg::pointer(dx), KernelArg::pointer(dx)};
  EXPECT_EQ(device_->launch(saxpy, geometry_1d(1, 32), too_few).code(),
            StatusCode::kInvalidArgument);
  std::vector<KernelArg> wrong_size = {KernelArg::pointer(dx), KernelArg::pointer(dx),
                                       KernelArg::int64(1), KernelArg::int64(1)};
  EXPECT_EQ(device_->launch(saxpy, geometry_1d(1, 32), wrong_size).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(device_->launch(saxpy + 1000, geometry_1d(1, 32), too_few).code(),
            StatusCode::kInvalidArgument);
  int host = 0;
  EXPECT_EQ(device_->free(&host).code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(device_->poison().is_ok());  // caller errors do not poison
  EXPECT_TRUE(device_->synchronize().is_ok());
}

TEST_F(CudaDeviceTest, LoadOfAMissingKernelNameFails) {
  eval::CompileRequest r;
  r.source = kSaxpy;
  r.kernel_name = "saxpy";
  r.arch = device_->arch();
  eval::CompileOutput out = compiler_->compile(r);
  ASSERT_TRUE(out.ok) << out.log;
  auto missing = device_->load(out.binary, "no_such_kernel");
  ASSERT_FALSE(missing.is_ok());
  EXPECT_NE(missing.status().message().find("CUDA_ERROR_NOT_FOUND"), std::string::npos)
      << missing.status().to_string();
  EXPECT_TRUE(device_->poison().is_ok());
}

// Kept last in the file: a sticky error may leave the whole process unable to use CUDA (ctest
// runs each test in its own process; a plain run of the binary runs this one last).
TEST_F(CudaDeviceTest, IllegalAddressPoisonsTheDevice) {
  const char* source = R"(
extern "C" __global__ void wild_write(float* unused) {
  *reinterpret_cast<volatile float*>(0x10) = 1.0f;
}
)";
  KernelHandle kernel = build(source, "wild_write");
  void* buffer = alloc(64);
  std::vector<KernelArg> args = {KernelArg::pointer(buffer)};
  Status status = device_->launch(kernel, geometry_1d(1, 1), args);
  if (status.is_ok()) status = device_->synchronize();
  ASSERT_FALSE(status.is_ok());
  EXPECT_EQ(status.code(), StatusCode::kInternal) << status.to_string();
  EXPECT_TRUE(status.message().find("CUDA_ERROR_ILLEGAL_ADDRESS") != std::string::npos ||
              status.message().find("CUDA_ERROR_LAUNCH_FAILED") != std::string::npos)
      << status.to_string();
  EXPECT_FALSE(device_->poison().is_ok());

  Result<void*> refused = device_->alloc(64);
  ASSERT_FALSE(refused.is_ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.status().message().find("device context is poisoned by an earlier error"),
            std::string::npos)
      << refused.status().to_string();
  EXPECT_EQ(device_->launch(kernel, geometry_1d(1, 1), args).code(),
            StatusCode::kFailedPrecondition);
  EXPECT_EQ(device_->time_launch(kernel, geometry_1d(1, 1), args, true).status().code(),
            StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace kiln::cuda

#else  // !KILN_HAVE_CUDA

TEST(CudaDevice, NeedsCudaHeaders) { GTEST_SKIP() << "no CUDA GPU: built without CUDA headers"; }

#endif  // KILN_HAVE_CUDA
