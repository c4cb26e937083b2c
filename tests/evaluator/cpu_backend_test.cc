// Tests of the cpu backend: CpuCompiler (system compiler + trampoline) and CpuDevice (dlopen,
// host memory, thread CPU-time timing), with real compiles.
#include <gtest/gtest.h>

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#include "evaluator/cpu/cpu_compiler.h"
#include "evaluator/cpu/cpu_device.h"

namespace kiln::eval {
namespace {

constexpr const char* kSaxpySource = R"(
#include <cstdint>
extern "C" void saxpy(const float* x, const float* y, float* out, int64_t n, float a) {
  for (int64_t i = 0; i < n; ++i) out[i] = a * x[i] + y[i];
}
)";

// `reps` passes over a buffer: the work grows with reps and cannot be folded to a closed form.
constexpr const char* kRepeatSource = R"(
#include <cstdint>
extern "C" void repeat(const float* x, float* y, int64_t n, int64_t reps) {
  for (int64_t r = 0; r < reps; ++r)
    for (int64_t i = 0; i < n; ++i) y[i] = y[i] * 0.999f + x[(i * 7 + r) % n];
}
)";

ArgSpec tensor_in(DType t, std::string name) { return {ArgSpec::Kind::kTensorIn, t, std::move(name)}; }
ArgSpec tensor_out(DType t, std::string name) { return {ArgSpec::Kind::kTensorOut, t, std::move(name)}; }
ArgSpec int64_arg(std::string name) { return {ArgSpec::Kind::kInt64, DType::kI64, std::move(name)}; }
ArgSpec float_arg(std::string name) { return {ArgSpec::Kind::kFloat32, DType::kF32, std::move(name)}; }

CompileRequest saxpy_request() {
  CompileRequest r;
  r.source = kSaxpySource;
  r.kernel_name = "saxpy";
  r.arch = "cpu";
  r.signature = {tensor_in(DType::kF32, "x"), tensor_in(DType::kF32, "y"),
                 tensor_out(DType::kF32, "out"), int64_arg("n"), float_arg("a")};
  return r;
}

CompileRequest repeat_request() {
  CompileRequest r;
  r.source = kRepeatSource;
  r.kernel_name = "repeat";
  r.arch = "cpu";
  r.signature = {tensor_in(DType::kF32, "x"), tensor_out(DType::kF32, "y"), int64_arg("n"),
                 int64_arg("reps")};
  return r;
}

std::unique_ptr<CpuCompiler> make_compiler() {
  auto compiler = CpuCompiler::create();
  EXPECT_TRUE(compiler.is_ok()) << compiler.status().to_string();
  return compiler.is_ok() ? std::move(compiler).value() : nullptr;
}

std::unique_ptr<CpuDevice> make_device() {
  auto device = CpuDevice::create();
  EXPECT_TRUE(device.is_ok()) << device.status().to_string();
  return device.is_ok() ? std::move(device).value() : nullptr;
}

// Device buffer holding `host`'s contents.
template <typename T>
void* upload(CpuDevice& device, const std::vector<T>& host) {
  auto p = device.alloc(host.size() * sizeof(T));
  EXPECT_TRUE(p.is_ok());
  EXPECT_TRUE(device.copy_to_device(*p, host.data(), host.size() * sizeof(T)).is_ok());
  return *p;
}

TEST(CpuCompiler, CompilesLoadsAndRunsSaxpyCheckingEveryElement) {
  auto compiler = make_compiler();
  ASSERT_NE(compiler, nullptr);
  EXPECT_EQ(compiler->backend(), "cpu");
  EXPECT_NE(compiler->toolchain_version().find("++"), std::string::npos)
      << compiler->toolchain_version();
  EXPECT_EQ(compiler->toolchain_version().find('\n'), std::string::npos);

  CompileOutput out = compiler->compile(saxpy_request());
  ASSERT_TRUE(out.ok) << out.log;
  EXPECT_FALSE(out.binary.empty());
  EXPECT_EQ(out.cache_key, compiler->cache_key(saxpy_request()));
  EXPECT_EQ(out.cache_key.size(), 64u);
  EXPECT_GT(out.compile_ms, 0);

  auto device = make_device();
  ASSERT_NE(device, nullptr);
  EXPECT_EQ(device->backend(), "cpu");
  EXPECT_EQ(device->arch(), "cpu");
  EXPECT_FALSE(device->name().empty());
  EXPECT_EQ(device->sm_clock_mhz(), 0);
  auto kernel = device->load(out.binary, "saxpy");
  ASSERT_TRUE(kernel.is_ok()) << kernel.status().to_string();

  const int64_t n = 1003;  // not a multiple of any vector width
  std::vector<float> x(n), y(n), result(n);
  for (int64_t i = 0; i < n; ++i) {
    x[i] = 0.5f * static_cast<float>(i);
    y[i] = 3.0f - static_cast<float>(i);
  }
  void* dx = upload(*device, x);
  void* dy = upload(*device, y);
  auto dout = device->alloc(n * sizeof(float));
  ASSERT_TRUE(dout.is_ok());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(*dout) % 64, 0u);
  ASSERT_TRUE(device->fill(*dout, 0xFF, n * sizeof(float)).is_ok());  // NaN poison
  std::vector<KernelArg> args = {KernelArg::pointer(dx), KernelArg::pointer(dy),
                                 KernelArg::pointer(*dout), KernelArg::int64(n),
                                 KernelArg::float32(2.0f)};
  ASSERT_TRUE(device->launch(*kernel, LaunchGeometry{}, args).is_ok());
  ASSERT_TRUE(device->synchronize().is_ok());
  ASSERT_TRUE(device->copy_to_host(result.data(), *dout, n * sizeof(float)).is_ok());
  for (int64_t i = 0; i < n; ++i) EXPECT_EQ(result[i], 2.0f * x[i] + y[i]) << "index " << i;

  // The trampoline's record of the signature guards the launch.
  args.pop_back();
  Status short_args = device->launch(*kernel, LaunchGeometry{}, args);
  EXPECT_EQ(short_args.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(short_args.message().find("takes 5 arguments"), std::string::npos)
      << short_args.message();
  args.push_back(KernelArg::int64(2));  // 8 bytes where a float is expected
  EXPECT_EQ(device->launch(*kernel, LaunchGeometry{}, args).code(), StatusCode::kInvalidArgument);

  EXPECT_EQ(device->load(out.binary, "no_such_kernel").status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_FALSE(device->load("not an elf file", "saxpy").is_ok());
  for (void* p : {dx, dy, *dout}) EXPECT_TRUE(device->free(p).is_ok());
  EXPECT_EQ(device->free(dx).code(), StatusCode::kInvalidArgument);  // double free caught
  EXPECT_TRUE(device->unload(*kernel).is_ok());
  EXPECT_EQ(device->unload(*kernel).code(), StatusCode::kNotFound);
}

TEST(CpuCompiler, RunsF16KernelThroughFloat16) {
  auto compiler = make_compiler();
  ASSERT_NE(compiler, nullptr);
  CompileRequest r;
  r.source = R"(
#include <cstdint>
extern "C" void twice(const _Float16* x, _Float16* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] + x[i];
})";
  r.kernel_name = "twice";
  r.arch = "cpu";
  r.signature = {tensor_in(DType::kF16, "x"), tensor_out(DType::kF16, "y"), int64_arg("n")};
  CompileOutput out = compiler->compile(r);
  ASSERT_TRUE(out.ok) << out.log;

  auto device = make_device();
  ASSERT_NE(device, nullptr);
  auto kernel = device->load(out.binary, "twice");
  ASSERT_TRUE(kernel.is_ok()) << kernel.status().to_string();
  std::vector<_Float16> x = {static_cast<_Float16>(1.5f), static_cast<_Float16>(-2.25f),
                             static_cast<_Float16>(1000.0f)};
  void* dx = upload(*device, x);
  void* dy = *device->alloc(x.size() * sizeof(_Float16));
  ASSERT_TRUE(device->launch(*kernel, {}, {KernelArg::pointer(dx), KernelArg::pointer(dy),
                                           KernelArg::int64(3)}).is_ok());
  std::vector<_Float16> y(3);
  ASSERT_TRUE(device->copy_to_host(y.data(), dy, 3 * sizeof(_Float16)).is_ok());
  EXPECT_EQ(static_cast<float>(y[0]), 3.0f);
  EXPECT_EQ(static_cast<float>(y[1]), -4.5f);
  EXPECT_EQ(static_cast<float>(y[2]), 2000.0f);
}

TEST(CpuCompiler, RefusesBf16WithClearLog) {
  auto compiler = make_compiler();
  ASSERT_NE(compiler, nullptr);
  CompileRequest r = saxpy_request();
  r.signature[1].dtype = DType::kBF16;
  CompileOutput out = compiler->compile(r);
  EXPECT_FALSE(out.ok);
  EXPECT_NE(out.log.find("bf16 tensors are not supported by the cpu backend"), std::string::npos)
      << out.log;
  EXPECT_NE(out.log.find("argument 1 'y'"), std::string::npos) << out.log;
  EXPECT_FALSE(out.cache_key.empty());  // deterministic in the request: cacheable
}

TEST(CpuCompiler, ReportsSyntaxErrorWithCompilerLog) {
  auto compiler = make_compiler();
  ASSERT_NE(compiler, nullptr);
  CompileRequest r = saxpy_request();
  r.source = "#include <cstdint>\nextern \"C\" void saxpy(const float* x, const float* y, "
             "float* out, int64_t n, float a) {\n  out[0] = x[0] +;\n}\n";
  CompileOutput out = compiler->compile(r);
  EXPECT_FALSE(out.ok);
  EXPECT_TRUE(out.binary.empty());
  // The log names the candidate's file and line, without the private directory's path.
  EXPECT_NE(out.log.find("kernel.cc:3:"), std::string::npos) << out.log;
  EXPECT_NE(out.log.find("error"), std::string::npos) << out.log;
  EXPECT_EQ(out.log.find("/kiln-cpu-"), std::string::npos) << out.log;
  EXPECT_FALSE(out.cache_key.empty());
}

TEST(CpuCompiler, SignatureMismatchIsCompileError) {
  auto compiler = make_compiler();
  ASSERT_NE(compiler, nullptr);
  CompileRequest r = saxpy_request();
  r.signature[4] = int64_arg("a");  // the function takes float a
  CompileOutput out = compiler->compile(r);
  EXPECT_FALSE(out.ok);
  EXPECT_NE(out.log.find("conflicting declaration"), std::string::npos) << out.log;
}

TEST(CpuCompiler, DefinesReachTheCode) {
  auto compiler = make_compiler();
  ASSERT_NE(compiler, nullptr);
  CompileRequest r;
  r.source = R"(
#include <cstdint>
extern "C" void fill_value(int64_t* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = KILN_VALUE * BLOCK;
})";
  r.kernel_name = "fill_value";
  r.arch = "cpu";
  r.defines = {{"KILN_VALUE", "(20 + 1)"}, {"BLOCK", "2"}};  // a space: argv needs no quoting
  r.signature = {tensor_out(DType::kI64, "y"), int64_arg("n")};
  CompileOutput out = compiler->compile(r);
  ASSERT_TRUE(out.ok) << out.log;

  auto device = make_device();
  ASSERT_NE(device, nullptr);
  auto kernel = device->load(out.binary, "fill_value");
  ASSERT_TRUE(kernel.is_ok()) << kernel.status().to_string();
  void* dy = *device->alloc(4 * sizeof(int64_t));
  ASSERT_TRUE(device->launch(*kernel, {}, {KernelArg::pointer(dy), KernelArg::int64(4)}).is_ok());
  std::vector<int64_t> y(4);
  ASSERT_TRUE(device->copy_to_host(y.data(), dy, 4 * sizeof(int64_t)).is_ok());
  EXPECT_EQ(y, std::vector<int64_t>(4, 42));
}

TEST(CpuCompiler, RefusesInvalidRequestsWithoutRunningTheCompiler) {
  auto compiler = make_compiler();
  ASSERT_NE(compiler, nullptr);
  CompileRequest bad_name = saxpy_request();
  bad_name.kernel_name = "saxpy(); system(\"x\"); void f";
  CompileOutput out = compiler->compile(bad_name);
  EXPECT_FALSE(out.ok);
  EXPECT_NE(out.log.find("not a C identifier"), std::string::npos) << out.log;

  CompileRequest reserved = saxpy_request();
  reserved.kernel_name = "kiln_entry";
  EXPECT_NE(compiler->compile(reserved).log.find("reserved"), std::string::npos);

  CompileRequest bad_define = saxpy_request();
  bad_define.defines["-o/tmp/x"] = "1";
  EXPECT_NE(compiler->compile(bad_define).log.find("not an identifier"), std::string::npos);

  CompileRequest wrong_arch = saxpy_request();
  wrong_arch.arch = "sm_90a";
  EXPECT_NE(compiler->compile(wrong_arch).log.find("arch 'cpu'"), std::string::npos);
}

TEST(CpuCompiler, CacheKeyCoversEveryInputButArgumentNames) {
  auto compiler = make_compiler();
  ASSERT_NE(compiler, nullptr);
  const CompileRequest base = saxpy_request();
  const std::string key = compiler->cache_key(base);
  auto differs = [&](auto change) {
    CompileRequest r = base;
    change(r);
    return compiler->cache_key(r) != key;
  };
  EXPECT_TRUE(differs([](CompileRequest& r) { r.source += "\n"; }));
  EXPECT_TRUE(differs([](CompileRequest& r) { r.defines["BLOCK"] = "4"; }));
  EXPECT_TRUE(differs([](CompileRequest& r) { r.arch = "cpu2"; }));
  EXPECT_TRUE(differs([](CompileRequest& r) { r.kernel_name = "saxpy2"; }));
  EXPECT_TRUE(differs([](CompileRequest& r) { r.signature[0].dtype = DType::kF64; }));
  EXPECT_TRUE(differs([](CompileRequest& r) { r.signature.pop_back(); }));
  EXPECT_FALSE(differs([](CompileRequest& r) { r.signature[0].name = "renamed"; }));
  CompileRequest a = base, b = base;
  a.defines = {{"A", "1"}, {"B", "2"}};
  b.defines = {{"B", "2"}, {"A", "1"}};
  EXPECT_EQ(compiler->cache_key(a), compiler->cache_key(b));
}

TEST(CpuCompiler, KillsCompilerPastTimeoutAndLeavesNoCacheKey) {
  CpuCompilerOptions options;
  options.compile_timeout = std::chrono::milliseconds(1);
  auto compiler = CpuCompiler::create(options);
  ASSERT_TRUE(compiler.is_ok()) << compiler.status().to_string();
  CompileOutput out = (*compiler)->compile(saxpy_request());
  EXPECT_FALSE(out.ok);
  EXPECT_NE(out.log.find("ran past 1 ms and was killed"), std::string::npos) << out.log;
  EXPECT_TRUE(out.cache_key.empty());  // says nothing about the source: must not be cached
}

TEST(CpuCompiler, CreateFailsForMissingCompiler) {
  CpuCompilerOptions options;
  options.compiler = "/nonexistent/kiln-no-such-c++";
  auto compiler = CpuCompiler::create(options);
  ASSERT_FALSE(compiler.is_ok());
  EXPECT_EQ(compiler.status().code(), StatusCode::kNotFound);
  EXPECT_NE(compiler.status().message().find("kiln-no-such-c++"), std::string::npos);
}

TEST(CpuDevice, TimeLaunchGrowsWithWork) {
  auto compiler = make_compiler();
  auto device = make_device();
  ASSERT_TRUE(compiler && device);
  CompileOutput out = compiler->compile(repeat_request());
  ASSERT_TRUE(out.ok) << out.log;
  auto kernel = device->load(out.binary, "repeat");
  ASSERT_TRUE(kernel.is_ok()) << kernel.status().to_string();
  const int64_t n = 1 << 14;
  void* dx = upload(*device, std::vector<float>(n, 1.0f));
  void* dy = upload(*device, std::vector<float>(n, 0.0f));
  // Best of a few samples, so one preempted sample does not decide.
  auto best_us = [&](int64_t reps, bool flush) {
    double best = 1e300;
    for (int i = 0; i < 3; ++i) {
      auto t = device->time_launch(*kernel, {},
                                   {KernelArg::pointer(dx), KernelArg::pointer(dy),
                                    KernelArg::int64(n), KernelArg::int64(reps)},
                                   flush);
      EXPECT_TRUE(t.is_ok()) << t.status().to_string();
      best = std::min(best, t.value_or(1e300));
    }
    return best;
  };
  double small_us = best_us(20, true);
  double large_us = best_us(80, false);
  EXPECT_GT(small_us, 0);
  EXPECT_GT(large_us, small_us);
  EXPECT_EQ(device->time_launch(*kernel + 100, {}, {}, false).status().code(),
            StatusCode::kNotFound);
}

// A kernel's time is its own work: pinned to one core beside three busy threads, it gets about a
// quarter of the wall clock, and the time it reports stays near what it does alone instead of
// growing with the wait (a loaded CI runner must not turn into noisy, inflated timings).
TEST(CpuDevice, TimeLaunchDoesNotCountTimeGivenToOtherThreads) {
  auto compiler = make_compiler();
  auto device = make_device();
  ASSERT_TRUE(compiler && device);
  CompileOutput out = compiler->compile(repeat_request());
  ASSERT_TRUE(out.ok) << out.log;
  auto kernel = device->load(out.binary, "repeat");
  ASSERT_TRUE(kernel.is_ok()) << kernel.status().to_string();
  const int64_t n = 1 << 14;
  void* dx = upload(*device, std::vector<float>(n, 1.0f));
  void* dy = upload(*device, std::vector<float>(n, 0.0f));
  const std::vector<KernelArg> args = {KernelArg::pointer(dx), KernelArg::pointer(dy), KernelArg::int64(n),
                                       KernelArg::int64(800)};
  cpu_set_t saved;
  ASSERT_EQ(sched_getaffinity(0, sizeof(saved), &saved), 0);
  cpu_set_t one;
  CPU_ZERO(&one);
  int cpu = 0;
  while (cpu < CPU_SETSIZE && !CPU_ISSET(cpu, &saved)) ++cpu;
  CPU_SET(cpu, &one);
  if (sched_setaffinity(0, sizeof(one), &one) != 0) GTEST_SKIP() << "cannot pin threads to one core here";
  auto alone = device->time_launch(*kernel, {}, args, false);
  ASSERT_TRUE(alone.is_ok()) << alone.status().to_string();

  std::atomic<bool> stop{false};
  std::atomic<int> spinning{0};
  std::vector<std::thread> busy;
  for (int i = 0; i < 3; ++i) {
    busy.emplace_back([&] {
      sched_setaffinity(0, sizeof(one), &one);
      ++spinning;
      while (!stop.load(std::memory_order_relaxed)) {
      }
    });
  }
  while (spinning.load() < 3) std::this_thread::yield();
  const auto start = std::chrono::steady_clock::now();
  auto shared = device->time_launch(*kernel, {}, args, false);
  const double wall_us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
  stop = true;
  for (auto& t : busy) t.join();
  sched_setaffinity(0, sizeof(saved), &saved);
  ASSERT_TRUE(shared.is_ok()) << shared.status().to_string();
  // Four runnable threads on one core: the wall clock is about four times the kernel's work.
  EXPECT_LT(*shared, 0.6 * wall_us) << "reported " << *shared << " us, alone " << *alone << " us";
  EXPECT_LT(*shared, 2.0 * *alone) << "wall " << wall_us << " us";
  EXPECT_GT(*shared, 0.5 * *alone) << "wall " << wall_us << " us";
}

TEST(CpuDevice, TwoLoadedKernelsCoexist) {
  auto compiler = make_compiler();
  auto device = make_device();
  ASSERT_TRUE(compiler && device);
  CompileOutput saxpy = compiler->compile(saxpy_request());
  CompileOutput repeat = compiler->compile(repeat_request());
  ASSERT_TRUE(saxpy.ok && repeat.ok) << saxpy.log << repeat.log;
  auto k1 = device->load(saxpy.binary, "saxpy");
  auto k2 = device->load(repeat.binary, "repeat");
  auto k3 = device->load(saxpy.binary, "saxpy");  // the same binary twice: its own handle
  ASSERT_TRUE(k1.is_ok() && k2.is_ok() && k3.is_ok());
  EXPECT_NE(*k1, *k2);
  EXPECT_NE(*k1, *k3);

  void* x = upload(*device, std::vector<float>{1, 2});
  void* y = upload(*device, std::vector<float>{10, 20});
  void* out = upload(*device, std::vector<float>{0, 0});
  auto run_saxpy = [&](KernelHandle k, float a) {
    return device->launch(k, {}, {KernelArg::pointer(x), KernelArg::pointer(y),
                                  KernelArg::pointer(out), KernelArg::int64(2),
                                  KernelArg::float32(a)});
  };
  ASSERT_TRUE(run_saxpy(*k1, 3).is_ok());
  ASSERT_TRUE(device->launch(*k2, {}, {KernelArg::pointer(x), KernelArg::pointer(y),
                                       KernelArg::int64(2), KernelArg::int64(1)}).is_ok());
  ASSERT_TRUE(device->unload(*k1).is_ok());
  ASSERT_TRUE(run_saxpy(*k3, 3).is_ok());  // unloading one copy leaves the other working
  std::vector<float> result(2);
  ASSERT_TRUE(device->copy_to_host(result.data(), out, sizeof(float) * 2).is_ok());
  std::vector<float> host_y(2);
  ASSERT_TRUE(device->copy_to_host(host_y.data(), y, sizeof(float) * 2).is_ok());
  EXPECT_EQ(result[0], 3 * 1 + host_y[0]);
  EXPECT_EQ(result[1], 3 * 2 + host_y[1]);
}

}  // namespace
}  // namespace kiln::eval
