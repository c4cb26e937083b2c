// Tests of scan_source: each banned construct is found on its line, the same text in a comment
// or a string is not, allowed includes and honest kernels pass.
#include "evaluator/source_scan.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

namespace kiln::eval {
namespace {

std::string describe(const std::vector<ScanFinding>& findings) {
  std::string s;
  for (const ScanFinding& f : findings) {
    s += "  " + f.rule + " @" + std::to_string(f.line) + ": " + f.excerpt + "\n";
  }
  return s.empty() ? "  (none)\n" : s;
}

bool has(const std::vector<ScanFinding>& findings, const std::string& rule, int line) {
  for (const ScanFinding& f : findings) {
    if (f.rule == rule && f.line == line) return true;
  }
  return false;
}

struct BannedCase {
  const char* backend;
  const char* construct;  // placed on line 3 of a small kernel
  const char* rule;
};

constexpr BannedCase kBannedCases[] = {
    {"cpu", "asm volatile(\"nop\");", "asm:asm"},
    {"cpu", "__asm__(\"nop\");", "asm:__asm__"},
    {"cpu", "void* h = dlopen(0, 0);", "identifier:dlopen"},
    {"cpu", "dlsym(0, 0);", "identifier:dlsym"},
    {"cpu", "syscall(39);", "identifier:syscall"},
    {"cpu", "fork();", "identifier:fork"},
    {"cpu", "execve(0, 0, 0);", "identifier:execve"},
    {"cpu", "system(0);", "identifier:system"},
    {"cpu", "popen(0, 0);", "identifier:popen"},
    {"cpu", "fopen(0, 0);", "identifier:fopen"},
    {"cpu", "int fd = open(0, 0);", "identifier:open"},
    {"cpu", "mmap(0, 0, 0, 0, 0, 0);", "identifier:mmap"},
    {"cpu", "mprotect(0, 0, 0);", "identifier:mprotect"},
    {"cpu", "clock_gettime(0, 0);", "identifier:clock_gettime"},
    {"cpu", "gettimeofday(0, 0);", "identifier:gettimeofday"},
    {"cpu", "auto t = __rdtsc();", "identifier:__rdtsc"},
    {"cpu", "__attribute__((constructor)) void early() {}", "identifier:constructor"},
    {"cpu", "std::thread t;", "identifier:std::thread"},
    {"cpu", "pthread_create(0, 0, 0, 0);", "identifier:pthread_create"},
    {"cpu", "getenv(0);", "identifier:getenv"},
    {"cpu", "signal(0, 0);", "identifier:signal"},
    {"cpu", "write(1, 0, 0);", "identifier:write"},
    {"cpu", "auto now = std::chrono::steady_clock::now();", "identifier:chrono"},
    {"cpu", "#define CAT(a, b) a##b", "token-paste:##"},
    {"cpu", "int \\u0064lopen_ = 0;", "ucn:\\"},
    {"cpu", "_Pragma(\"GCC poison x\")", "pragma:_Pragma"},
    {"cpu", "#include <dlfcn.h>", "include:dlfcn.h"},
    {"cpu", "#include \"cstdint\"", "include:cstdint"},  // only <...> from the list
    {"cpu", "#define H <dlfcn.h>\n#include H", "include:H"},  // line 4, see below
    {"cpu", "%:include <cstdio>", "include:cstdio"},
    {"cpu", "#pragma GCC poison x", "pragma:GCC poison x"},
    {"cpu", "#include_next <cmath>", "directive:include_next"},
    {"cpu", "#import <x>", "directive:import"},
    {"cuda", "#include <cublas_v2.h>", "include:cublas_v2.h"},
    {"cuda", "cublasSgemm(0);", "identifier:cublasSgemm"},
    {"cuda", "cudnnCreate(0);", "identifier:cudnnCreate"},
    {"cuda", "cudaMalloc(0, 0);", "identifier:cudaMalloc"},
    {"cuda", "cudaLaunchKernel(0);", "identifier:cudaLaunchKernel"},
    {"cuda", "cudaStreamCreate(0);", "identifier:cudaStreamCreate"},
    {"cuda", "cudaGraphLaunch(0, 0);", "identifier:cudaGraphLaunch"},
    {"cuda", "cuLaunchKernel(0);", "identifier:cuLaunchKernel"},
    {"cuda", "__host__ void f() {}", "host-code:__host__"},
    {"cuda", "int main() { return 0; }", "host-code:main"},
    {"cuda", "child<<<1, 1>>>();", "host-code:<<<"},
    {"cuda", "asm volatile(\"mov.u64 %0, %%globaltimer;\" : \"=l\"(t));", "timer:globaltimer"},
    {"cuda", "asm volatile(\"mov.u64 %0, %%global\" \"timer;\" : \"=l\"(t));", "timer:globaltimer"},
    {"cuda", "asm volatile(\"mov.u32 %0, %%globaltimer_lo;\" : \"=r\"(t));", "timer:globaltimer"},
    {"cuda", "asm volatile(\"mov.u64 %0, %%clock64;\" : \"=l\"(t));", "timer:clock64"},
    {"cuda", "asm volatile(\"mov.u32 %0, %%clo\" \"ck;\" : \"=r\"(t));", "timer:clock"},
    {"cuda", "asm volatile(\"mov.u32 %0, %%pm3;\" : \"=r\"(t));", "timer:pm3"},
    {"cuda", "long long t = clock64();", "timer:clock64"},
    {"cuda", "unsigned t = clock();", "timer:clock"},
    {"cpu", "# 1 \"/usr/include/c++/12/cmath\" 1 3", "directive:linemarker"},
    {"cuda", "# 7 \"kernel.cu\" 2", "directive:linemarker"},
    {"cuda", "#pragma nv_abi", "pragma:nv_abi"},
};

TEST(SourceScan, FindsEachBannedConstructOnItsLine) {
  for (const BannedCase& c : kBannedCases) {
    std::string source = std::string("// kernel\nextern \"C\" void k() {}\n") + c.construct + "\n";
    // A construct of two lines reports its second (the #include).
    int line = std::string(c.construct).find('\n') == std::string::npos ? 3 : 4;
    std::vector<ScanFinding> findings = scan_source(source, c.backend);
    EXPECT_TRUE(has(findings, c.rule, line))
        << c.backend << " `" << c.construct << "`: expected " << c.rule << " @" << line
        << ", got\n" << describe(findings);
    for (const ScanFinding& f : findings) {
      EXPECT_FALSE(f.excerpt.empty()) << f.rule;
      EXPECT_GE(f.line, 1);
    }
  }
}

TEST(SourceScan, IgnoresBannedTextInCommentsAndStrings) {
  for (const BannedCase& c : kBannedCases) {
    std::string construct = c.construct;
    if (construct.find('\n') != std::string::npos) continue;
    std::string escaped;
    for (char ch : construct) {
      if (ch == '"' || ch == '\\') escaped += '\\';
      escaped += ch;
    }
    const std::vector<std::string> hidden = {
        "// " + construct + "\n",
        "/* " + construct + " */\n",
        "/*\n * " + construct + "\n */\n",
        "const char* s = \"" + escaped + "\";\n",
        "const char* r = R\"x(" + construct + ")x\";\n",
    };
    for (const std::string& text : hidden) {
      // cuda's timer registers are matched inside strings on purpose: they live in asm strings.
      bool in_string = text.rfind("const char*", 0) == 0;
      if (in_string && std::string(c.rule).rfind("timer:", 0) == 0) continue;
      std::string source = "extern \"C\" void k() {}\n" + text;
      std::vector<ScanFinding> findings = scan_source(source, c.backend);
      EXPECT_FALSE(has(findings, c.rule, 2) || has(findings, c.rule, 3))
          << c.backend << " hidden `" << text << "` was found:\n" << describe(findings);
    }
  }
}

TEST(SourceScan, LineSplicesAndDigraphsDoNotHideNames) {
  auto findings = scan_source("int x;\nvoid* p = dl\\\nopen(0, 0);\n", "cpu");
  EXPECT_TRUE(has(findings, "identifier:dlopen", 2)) << describe(findings);
  findings = scan_source("// a comment continued \\\ndlopen(0, 0);\n", "cpu");
  EXPECT_TRUE(findings.empty()) << "a spliced comment is still a comment\n" << describe(findings);
  findings = scan_source("#define P(a, b) a %:%: b\n", "cpu");
  EXPECT_TRUE(has(findings, "token-paste:##", 1)) << describe(findings);
  findings = scan_source("int n = 1'000'000; int m = open(0);\n", "cpu");
  EXPECT_TRUE(has(findings, "identifier:open", 1)) << describe(findings);
}

TEST(SourceScan, AllowsListedIncludesAndPragmas) {
  const char* cpu = R"(#include <cstdint>
#include <cmath>
#include <cstring>
#include <algorithm>
#include <immintrin.h>
#include <cstddef>
#include <climits>
#include <limits>
#include <type_traits>
#include <array>
#pragma once
#pragma GCC unroll 8
#pragma omp simd
  #  include   <cmath>
)";
  EXPECT_TRUE(scan_source(cpu, "cpu").empty()) << describe(scan_source(cpu, "cpu"));
  const char* cuda = R"(#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <cuda_pipeline.h>
#include <cuda/barrier>
#pragma unroll 4
__global__ void k(float* y) {
  unsigned sm;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
  asm volatile("cp.async.commit_group;");
  cudaGridDependencySynchronize();
  y[threadIdx.x] = static_cast<float>(sm);
}
)";
  EXPECT_TRUE(scan_source(cuda, "cuda").empty()) << describe(scan_source(cuda, "cuda"));
}

// The compiler joins adjacent literals (translation phase 6) before inline PTX reaches it, so the
// scan reads them joined, escapes decoded, and reports the line where the name starts.
TEST(SourceScan, ReadsAdjacentLiteralsJoinedAsTheCompilerDoes) {
  const std::vector<std::pair<std::string, std::string>> hidden = {
      {"asm(\"mov.u64 %0, %%glo\"\n    \"bal\" /* a comment */ \"timer;\" : \"=l\"(t));\n",
       "timer:globaltimer"},
      {"asm(\"mov.u64 %0, %%global\" R\"(timer;)\" : \"=l\"(t));\n", "timer:globaltimer"},
      {"asm(\"mov.u64 %0, %%global\\x74imer;\" : \"=l\"(t));\n", "timer:globaltimer"},
      {"asm(\"mov.u64 %0, %%c\\154ock64;\" : \"=l\"(t));\n", "timer:clock64"},
      {"asm(\"mov.u64 %0, %%\" \"clock64;\" : \"=l\"(t));\n", "timer:clock64"},
  };
  for (const auto& [text, rule] : hidden) {
    auto findings = scan_source("__global__ void k(long long* y) {\n" + text + "}\n", "cuda");
    EXPECT_TRUE(has(findings, rule, 2)) << text << describe(findings);
  }
  // Controls: literals apart (any token between them, a character literal too; the text is only
  // scanned, never compiled) are not one string, and registers that only name a position (%smid,
  // %laneid) or a register of the kernel's own (%clockwise) are fine.
  const char* allowed = R"(__global__ void k(unsigned* y) {
  const char* a = "%%global"; const char* b = "timer";
  const char* c[] = {"%%global", "timer"}; char d[] = {"%%clo" 'c' "k64"};
  asm volatile("mov.u32 %0, %%smid;" : "=r"(y[0]));
  asm volatile("mov.u32 %0, %%laneid;" : "=r"(y[1]));
  asm volatile("{ .reg .b32 %%clockwise; mov.u32 %%clockwise, 1; mov.u32 %0, %%clockwise; }"
               : "=r"(y[2]));
}
)";
  EXPECT_TRUE(scan_source(allowed, "cuda").empty()) << describe(scan_source(allowed, "cuda"));
}

TEST(SourceScan, HonestRmsnormKernelHasNoFindings) {
  const char* source = R"(// rmsnorm: y = x / sqrt(mean(x^2) + eps) * w, one row at a time.
#include <cmath>
#include <cstdint>

#ifndef BLOCK
#define BLOCK 8
#endif

extern "C" void rmsnorm(const float* x, const float* w, float* y, int64_t M, int64_t N,
                        float eps) {
  for (int64_t row = 0; row < M; ++row) {
    const float* xr = x + row * N;
    float sum = 0.0f;  // no dlopen, no clock() here: comments may say anything
#pragma GCC unroll BLOCK
    for (int64_t i = 0; i < N; ++i) sum += xr[i] * xr[i];
    const float scale = 1.0f / std::sqrt(sum / static_cast<float>(N) + eps);
    for (int64_t i = 0; i < N; ++i) y[row * N + i] = xr[i] * scale * w[i];
  }
  const char* note = "timing uses clock_gettime elsewhere";
  (void)note;
  const char32_t c = U'\'';
  (void)c;
}
)";
  auto findings = scan_source(source, "cpu");
  EXPECT_TRUE(findings.empty()) << describe(findings);
}

TEST(SourceScan, ExcerptIsTheOffendingLine) {
  auto findings = scan_source("int a;\n   system(\"rm -rf /\");   \nint b;\n", "cpu");
  ASSERT_EQ(findings.size(), 1u) << describe(findings);
  EXPECT_EQ(findings[0].rule, "identifier:system");
  EXPECT_EQ(findings[0].line, 2);
  EXPECT_EQ(findings[0].excerpt, "system(\"rm -rf /\");");
}

TEST(SourceScan, UnknownBackendFailsClosed) {
  auto findings = scan_source("int x;", "rocm");
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_EQ(findings[0].rule, "backend:rocm");
}

}  // namespace
}  // namespace kiln::eval
