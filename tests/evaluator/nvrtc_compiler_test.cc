// Tests of the compile path: NvrtcCompiler (needs libnvrtc, no GPU), CompileCache, CachingCompiler
// and CompilePool. NVRTC tests skip only where libnvrtc cannot be loaded.
#include "evaluator/cuda/nvrtc_compiler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <future>
#include <optional>
#include <stdexcept>
#include <thread>
#include <vector>

#include "evaluator/compile_cache.h"
#include "evaluator/compile_pool.h"
#include "tests/support/test_env.h"

namespace kiln::cuda {
namespace {

using eval::CompileOutput;
using eval::CompileRequest;

constexpr const char* kSaxpy = R"(
extern "C" __global__ void saxpy(const float* x, float* y, long long n, float a) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) y[i] = fmaf(a, x[i], y[i]);
}
)";

CompileRequest request(std::string source, std::string kernel_name, std::string arch = "sm_90a") {
  CompileRequest r;
  r.source = std::move(source);
  r.kernel_name = std::move(kernel_name);
  r.arch = std::move(arch);
  return r;
}

class NvrtcCompilerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto loaded = NvrtcCompiler::load();
    if (!loaded.is_ok()) {
      GTEST_SKIP() << "libnvrtc cannot be loaded: " << loaded.status().to_string();
    }
    compiler_ = std::move(loaded).value();
  }
  std::unique_ptr<NvrtcCompiler> compiler_;
};

TEST_F(NvrtcCompilerTest, CompilesFp32KernelToElfCubinForSm90a) {
  CompileOutput out = compiler_->compile(request(kSaxpy, "saxpy"));
  ASSERT_TRUE(out.ok) << out.log;
  ASSERT_GE(out.binary.size(), 4u);
  EXPECT_EQ(out.binary.substr(0, 4), std::string("\x7f" "ELF"));
  EXPECT_GT(out.compile_ms, 0);
  EXPECT_FALSE(out.from_cache);
  EXPECT_EQ(out.cache_key.size(), 64u);
  EXPECT_EQ(compiler_->backend(), "cuda");
  EXPECT_EQ(compiler_->toolchain_version().rfind("nvrtc-", 0), 0u)
      << compiler_->toolchain_version();
}

TEST_F(NvrtcCompilerTest, CompilesKernelUsingHalfFromCudaFp16Header) {
  const char* source = R"(
#include <cuda_fp16.h>
extern "C" __global__ void add_half(const __half* x, __half* y, long long n) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) y[i] = __hadd(x[i], y[i]);
}
)";
  CompileOutput out = compiler_->compile(request(source, "add_half"));
  EXPECT_TRUE(out.ok) << "include dir '" << compiler_->include_dir() << "'\n" << out.log;
}

TEST_F(NvrtcCompilerTest, SyntaxErrorGivesLogNamingTheLine) {
  const char* source =
      "extern \"C\" __global__ void broken(float* y) {\n"  // line 1
      "  y[0] = 1.0f\n"                                      // line 2: missing ';'
      "}\n";
  CompileOutput out = compiler_->compile(request(source, "broken"));
  EXPECT_FALSE(out.ok);
  EXPECT_TRUE(out.binary.empty());
  EXPECT_NE(out.log.find("broken.cu("), std::string::npos) << out.log;
  EXPECT_NE(out.log.find("error"), std::string::npos) << out.log;
  EXPECT_TRUE(out.log.find("(2)") != std::string::npos || out.log.find("(3)") != std::string::npos)
      << out.log;
}

TEST_F(NvrtcCompilerTest, DefinesReachTheSource) {
  const char* source = R"(
#if BLOCK != 256
#error BLOCK must be 256
#endif
extern "C" __global__ void k(float* y) { y[threadIdx.x] = BLOCK; }
)";
  CompileRequest r = request(source, "k");
  CompileOutput without = compiler_->compile(r);
  EXPECT_FALSE(without.ok);
  EXPECT_NE(without.log.find("BLOCK must be 256"), std::string::npos) << without.log;
  r.defines["BLOCK"] = "128";
  EXPECT_FALSE(compiler_->compile(r).ok);
  r.defines["BLOCK"] = "256";
  CompileOutput with = compiler_->compile(r);
  EXPECT_TRUE(with.ok) << with.log;
}

TEST_F(NvrtcCompilerTest, RejectsVirtualArchBecauseACubinIsNeeded) {
  CompileOutput out = compiler_->compile(request(kSaxpy, "saxpy", "compute_90"));
  EXPECT_FALSE(out.ok);
  EXPECT_NE(out.log.find("sm_90a"), std::string::npos) << out.log;
}

// What the text scan cannot see, the PTX shows: each source compiles, and the scan of its PTX
// refuses it, naming the rule and the program's line.
struct PtxRefusal {
  const char* what;
  const char* body;  // line 2 onwards of `k`; line 1 is the signature
  const char* rule;
  int line;
};

constexpr PtxRefusal kPtxRefusals[] = {
    {"%globaltimer split across literals",
     "  unsigned long long t;\n"
     "  asm volatile(\"mov.u64 %0, %%global\" \"timer;\" : \"=l\"(t));\n"
     "  y[0] = t;\n",
     "ptx:%globaltimer", 3},
    {"%globaltimer from a macro and a literal",
     "#define SREG \"%%global\"\n"
     "  unsigned long long t;\n"
     "  asm volatile(\"mov.u64 %0, \" SREG \"timer;\" : \"=l\"(t));\n"
     "  y[0] = t;\n",
     "ptx:%globaltimer", 4},
    {"clock64 by token pasting",
     "#define CAT(a, b) a##b\n"
     "  y[0] = CAT(clock, 64)();\n",
     "ptx:%clock64", 3},
    {"clock() behind a macro (a 64-bit read on sm_90)",
     "#define NOW() clock()\n"
     "  y[0] = NOW();\n",
     "ptx:%clock64", 3},
    {"device malloc by token pasting",
     "#define CAT(a, b) a##b\n"
     "  y[0] = reinterpret_cast<unsigned long long>(CAT(mal, loc)(16));\n",
     "ptx:extern-function:malloc", 3},
    {"device new and delete",
     "  float* p = new float[4];\n"
     "  y[0] = static_cast<unsigned long long>(p[1]);\n"
     "  delete[] p;\n",
     "ptx:extern-function:malloc", 2},
};

TEST_F(NvrtcCompilerTest, ScanOfThePtxRefusesWhatTheTextScanCannotSee) {
  for (const PtxRefusal& c : kPtxRefusals) {
    std::string source =
        std::string("extern \"C\" __global__ void k(unsigned long long* y) {\n") + c.body + "}\n";
    CompileOutput out = compiler_->compile(request(source, "k"));
    EXPECT_FALSE(out.ok) << c.what;
    EXPECT_TRUE(out.rejected) << c.what << ":\n" << out.log;
    EXPECT_TRUE(out.binary.empty()) << c.what;
    const std::string expected = std::string("kiln: scan of the generated PTX: ") + c.rule +
                                 " at line " + std::to_string(c.line) + ": ";
    EXPECT_NE(out.log.find(expected), std::string::npos)
        << c.what << ": expected '" << expected << "' in\n"
        << out.log;
  }
}

TEST_F(NvrtcCompilerTest, ScanOfThePtxAllowsPrintfAssertAndPositionRegisters) {
  const char* source = R"(
extern "C" __global__ void k(unsigned* y, int n) {
  unsigned sm, lane;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
  asm volatile("mov.u32 %0, %%laneid;" : "=r"(lane));
  if (n < 0) printf("n = %d\n", n);
  if (n == -7) __assertfail("n", "k.cu", 7, "k", 1);
  __nanosleep(100);
  y[threadIdx.x] = sm + lane;
}
)";
  CompileOutput out = compiler_->compile(request(source, "k"));
  EXPECT_TRUE(out.ok) << out.log;
  EXPECT_FALSE(out.rejected);
}

TEST_F(NvrtcCompilerTest, CacheKeyChangesWithSourceDefinesAndArchOnly) {
  CompileRequest base = request(kSaxpy, "saxpy");
  base.defines["BLOCK"] = "256";
  const std::string key = compiler_->compile(base).cache_key;
  EXPECT_EQ(compiler_->compile(base).cache_key, key);

  CompileRequest source = base;
  source.source += "\n// a comment\n";
  CompileRequest define = base;
  define.defines["BLOCK"] = "128";
  CompileRequest extra_define = base;
  extra_define.defines["UNROLL"] = "4";
  CompileRequest arch = base;
  arch.arch = "sm_100a";
  CompileRequest name = base;
  name.kernel_name = "saxpy2";
  for (const CompileRequest* r : {&source, &define, &extra_define, &arch, &name}) {
    EXPECT_NE(eval::compile_cache_key(*r, "cuda", compiler_->toolchain_version()), key);
  }
  EXPECT_EQ(eval::compile_cache_key(base, "cuda", compiler_->toolchain_version()), key);
  EXPECT_NE(eval::compile_cache_key(base, "cuda", "nvrtc-0.0"), key);
}

TEST_F(NvrtcCompilerTest, CachingCompilerServesSecondCompileFromCacheWithSameBytes) {
  testing::TempDir dir;
  eval::CachingCompiler caching(*compiler_, eval::CompileCache(dir.path()));
  CompileOutput first = caching.compile(request(kSaxpy, "saxpy"));
  ASSERT_TRUE(first.ok) << first.log;
  EXPECT_FALSE(first.from_cache);
  EXPECT_GT(first.compile_ms, 0);
  CompileOutput second = caching.compile(request(kSaxpy, "saxpy"));
  ASSERT_TRUE(second.ok);
  EXPECT_TRUE(second.from_cache);
  EXPECT_EQ(second.compile_ms, 0);
  EXPECT_EQ(second.binary, first.binary);
  EXPECT_EQ(second.cache_key, first.cache_key);
  EXPECT_EQ(caching.backend(), "cuda");
}

TEST_F(NvrtcCompilerTest, CachingCompilerDoesNotCacheAFailedCompile) {
  testing::TempDir dir;
  eval::CompileCache cache(dir.path());
  eval::CachingCompiler caching(*compiler_, cache);
  CompileRequest bad = request("extern \"C\" __global__ void k() { nonsense }", "k");
  CompileOutput first = caching.compile(bad);
  EXPECT_FALSE(first.ok);
  EXPECT_FALSE(cache.get(first.cache_key).has_value());
  CompileOutput second = caching.compile(bad);
  EXPECT_FALSE(second.ok);
  EXPECT_FALSE(second.from_cache);
  EXPECT_FALSE(second.log.empty());
}

TEST_F(NvrtcCompilerTest, PoolCompilesEightRequestsOnFourThreads) {
  eval::CompilePool pool(*compiler_, 4);
  EXPECT_EQ(pool.thread_count(), 4u);
  std::vector<std::future<CompileOutput>> futures;
  for (int i = 0; i < 8; ++i) {
    CompileRequest r = request(kSaxpy, "saxpy");
    r.defines["VARIANT"] = std::to_string(i);
    futures.push_back(pool.submit(std::move(r)));
  }
  std::vector<std::string> keys;
  for (auto& f : futures) {
    CompileOutput out = f.get();
    EXPECT_TRUE(out.ok) << out.log;
    EXPECT_EQ(out.binary.substr(0, 4), std::string("\x7f" "ELF"));
    keys.push_back(out.cache_key);
  }
  std::sort(keys.begin(), keys.end());
  EXPECT_EQ(std::unique(keys.begin(), keys.end()), keys.end());
}

// -- Without NVRTC ----------------------------------------------------------------------------

// Hex keys of the length compile_cache_key produces.
std::string key_of(const std::string& text) {
  return eval::compile_cache_key(request(text, "k"), "test", "v1");
}

TEST(CompileCache, EntrySurvivesANewInstanceOnTheSameDirectory) {
  testing::TempDir dir;
  const std::string key = key_of("a");
  const std::string bytes("\x7f" "ELF\0binary\xff", 12);
  ASSERT_TRUE(eval::CompileCache(dir.path()).put(key, bytes).is_ok());
  std::optional<std::string> got = eval::CompileCache(dir.path()).get(key);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(*got, bytes);
  EXPECT_FALSE(eval::CompileCache(dir.path()).get(key_of("b")).has_value());
}

TEST(CompileCache, DamagedEntryReadsAsMiss) {
  testing::TempDir dir;
  eval::CompileCache cache(dir.path());
  const std::string key = key_of("a");
  ASSERT_TRUE(cache.put(key, std::string(1000, 'x')).is_ok());
  std::string path = dir.path() + "/" + key.substr(0, 2) + "/" + key;
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(-10, std::ios::end);
  f.put('y');
  f.close();
  EXPECT_FALSE(cache.get(key).has_value());
}

TEST(CompileCache, RejectsMalformedKeys) {
  testing::TempDir dir;
  eval::CompileCache cache(dir.path());
  EXPECT_EQ(cache.put("../../etc/passwd", "x").code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(cache.get("../../etc/passwd").has_value());
}

TEST(CompileCache, ConcurrentWritersOfOneKeyLeaveAWholeEntry) {
  testing::TempDir dir;
  eval::CompileCache cache(dir.path());
  const std::string key = key_of("a");
  const std::string bytes(1 << 20, 'z');
  std::vector<std::thread> writers;
  std::atomic<int> failures{0};
  for (int i = 0; i < 8; ++i) {
    writers.emplace_back([&] {
      for (int j = 0; j < 4; ++j) {
        if (!cache.put(key, bytes).is_ok()) ++failures;
        std::optional<std::string> got = cache.get(key);
        if (!got || *got != bytes) ++failures;
      }
    });
  }
  for (auto& t : writers) t.join();
  EXPECT_EQ(failures.load(), 0);
}

// A Compiler that fails in the ways CompilePool must contain.
class ScriptedCompiler : public eval::Compiler {
 public:
  std::string backend() const override { return "test"; }
  std::string toolchain_version() const override { return "v1"; }
  CompileOutput compile(const CompileRequest& r) override {
    ++calls;
    if (r.source == "throw") throw std::runtime_error("boom");
    if (r.source == "slow throw") {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      throw std::runtime_error("late boom");
    }
    if (r.source == "slow") std::this_thread::sleep_for(std::chrono::milliseconds(200));
    CompileOutput out;
    out.ok = true;
    out.binary = r.source;
    return out;
  }
  std::atomic<int> calls{0};
};

// A prefetch and the evaluation that needs the same binary, at the same time: one compile, both
// get its output; a compile that throws throws for both, and the key is compiled again later.
TEST(CachingCompiler, ConcurrentRequestsForOneKeyCompileOnce) {
  testing::TempDir dir;
  ScriptedCompiler inner;
  eval::CachingCompiler caching(inner, eval::CompileCache(dir.path()));
  std::vector<CompileOutput> outs(4);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < outs.size(); ++i)
    threads.emplace_back([&, i] { outs[i] = caching.compile(request("slow", "k")); });
  for (auto& t : threads) t.join();
  EXPECT_EQ(inner.calls.load(), 1);
  int ran = 0;  // the one request that compiled; the others waited for it (or, late, hit the cache)
  for (const auto& o : outs) {
    EXPECT_TRUE(o.ok);
    EXPECT_EQ(o.binary, "slow");
    ran += !o.shared && !o.from_cache;
  }
  EXPECT_EQ(ran, 1);
  EXPECT_TRUE(caching.compile(request("slow", "k")).from_cache);
  EXPECT_EQ(inner.calls.load(), 1);

  std::atomic<int> thrown{0};
  threads.clear();
  for (int i = 0; i < 3; ++i) {
    threads.emplace_back([&] {
      try {
        caching.compile(request("slow throw", "k"));
      } catch (const std::runtime_error& e) {
        if (std::string(e.what()) == "late boom") ++thrown;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(thrown.load(), 3);
  EXPECT_EQ(inner.calls.load(), 2);
  EXPECT_THROW(caching.compile(request("slow throw", "k")), std::runtime_error);
  EXPECT_EQ(inner.calls.load(), 3);  // nothing left in flight under the key
}

TEST(CompilePool, ExceptionFromCompilerBecomesAFailedOutput) {
  ScriptedCompiler compiler;
  eval::CompilePool pool(compiler, 2);
  CompileOutput thrown = pool.submit(request("throw", "k")).get();
  EXPECT_FALSE(thrown.ok);
  EXPECT_NE(thrown.log.find("boom"), std::string::npos) << thrown.log;
  EXPECT_TRUE(pool.submit(request("fine", "k")).get().ok);  // the worker survived
}

TEST(CompilePool, ShutdownAnswersEveryQueuedRequest) {
  ScriptedCompiler compiler;
  std::vector<std::future<CompileOutput>> futures;
  {
    eval::CompilePool pool(compiler, 1);
    for (int i = 0; i < 5; ++i) futures.push_back(pool.submit(request("slow", "k")));
  }
  int answered = 0;
  for (auto& f : futures) {
    ASSERT_EQ(f.wait_for(std::chrono::seconds(0)), std::future_status::ready);
    CompileOutput out = f.get();  // never a broken promise
    if (!out.ok) {
      EXPECT_NE(out.log.find("shut down"), std::string::npos);
    }
    ++answered;
  }
  EXPECT_EQ(answered, 5);
}

}  // namespace
}  // namespace kiln::cuda
