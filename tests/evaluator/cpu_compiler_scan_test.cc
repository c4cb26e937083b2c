// Tests of CpuCompiler's scan of the preprocessed source, with real compiles: names that macros
// build (a##b, glibc's __CONCAT) or hide are refused with the rule and the candidate's line, forged
// line markers are refused, names written out are left to the caller's text scan, and honest
// kernels full of macros compile.
#include <gtest/gtest.h>

#include <string>

#include "evaluator/cpu/cpu_compiler.h"
#include "evaluator/prelude.h"

namespace kiln::eval {
namespace {

// A request for `body` (lines 3 onwards of the candidate) behind kiln's cpu prelude, so lines are
// the candidate's own; the entry point is `void k(float* y, int64_t n)`.
CompileRequest request_for(const std::string& body) {
  CompileRequest r;
  r.source = with_prelude("cpu",
                          "#include <cmath>\n"
                          "#include <cstdint>\n" +
                              body);
  r.kernel_name = "k";
  r.arch = "cpu";
  r.defines["KILN_DTYPE"] = "float";
  r.signature = {{ArgSpec::Kind::kTensorOut, DType::kF32, "y"},
                 {ArgSpec::Kind::kInt64, DType::kI64, "n"}};
  return r;
}

class CpuCompilerScan : public ::testing::Test {
 protected:
  void SetUp() override {
    auto compiler = CpuCompiler::create();
    ASSERT_TRUE(compiler.is_ok()) << compiler.status().to_string();
    compiler_ = std::move(compiler).value();
  }
  std::unique_ptr<CpuCompiler> compiler_;
};

struct Refusal {
  const char* what;
  const char* body;
  const char* expected;  // in the log
};

constexpr Refusal kRefusals[] = {
    {"token-pasted system",
     "#define CAT(a, b) a##b\n"
     "extern \"C\" void k(float* y, int64_t n) { y[0] = CAT(sys, tem)(\"true\"); }\n",
     "kiln: scan of the preprocessed source: identifier:system at line 4: extern \"C\" void k("},
    {"system pasted by glibc's __CONCAT",
     "extern \"C\" void k(float* y, int64_t n) {\n"
     "  y[0] = __CONCAT(sys, tem)(\"true\");\n"
     "}\n",
     "identifier:system at line 4: y[0] = system(\"true\");"},
    {"a macro that hides a load-time constructor",
     "#define AT_LOAD __attribute__((__CONCAT(constr, uctor)))\n"
     "static int loaded = 0;\n"
     "AT_LOAD static void hook() { loaded = 1; }\n"
     "extern \"C\" void k(float* y, int64_t n) { y[0] = loaded; }\n",
     "identifier:constructor at line 5"},
    {"the time-stamp counter through an allowed header",
     "#include <immintrin.h>\n"
     "#define NOW() __CONCAT(__rd, tsc)()\n"
     "extern \"C\" void k(float* y, int64_t n) { y[0] = NOW(); }\n",
     "identifier:__rdtsc at line 5"},
    {"a line marker that passes the candidate's lines off as a header's",
     "# 1 \"/usr/include/c++/12/cmath\" 1 3\n"
     "extern \"C\" void k(float* y, int64_t n) { y[0] = __CONCAT(sys, tem)(\"true\"); }\n",
     "kiln: scan of the source: directive:linemarker"},
};

TEST_F(CpuCompilerScan, RefusesNamesThatOnlyThePreprocessorSpellsOut) {
  for (const Refusal& c : kRefusals) {
    CompileOutput out = compiler_->compile(request_for(c.body));
    EXPECT_FALSE(out.ok) << c.what;
    EXPECT_TRUE(out.rejected) << c.what << ":\n" << out.log;
    EXPECT_TRUE(out.binary.empty()) << c.what;
    EXPECT_NE(out.log.find(c.expected), std::string::npos)
        << c.what << ": expected '" << c.expected << "' in\n"
        << out.log;
  }
}

// compile()'s contract: callers refuse the text scan's findings before compiling. So a name the
// source spells out is left to them (kiln's own test kernels crash on purpose with abort),
// and only what the preprocessor alone spells out is refused here.
TEST_F(CpuCompilerScan, RefusesOnlyWhatTheTextScanCannotSee) {
  CompileOutput spelled = compiler_->compile(
      request_for("extern \"C\" void k(float* y, int64_t n) { if (n < 0) abort(); }\n"));
  EXPECT_TRUE(spelled.ok) << spelled.log;
  CompileOutput pasted = compiler_->compile(request_for(
      "extern \"C\" void k(float* y, int64_t n) { if (n < 0) __CONCAT(ab, ort)(); }\n"));
  EXPECT_TRUE(pasted.rejected) << pasted.log;
  EXPECT_NE(pasted.log.find("identifier:abort at line 3"), std::string::npos) << pasted.log;
}

TEST_F(CpuCompilerScan, HonestKernelFullOfMacrosCompiles) {
  CompileRequest r = request_for(R"(#include <immintrin.h>
#include <climits>
#include <limits>
#ifndef UNROLL
#define UNROLL 4
#endif
#define SQUARE(v) ((v) * (v))
// Comments may say system, dlopen or __rdtsc; strings too.
static const char* kNote = "no system() here";
extern "C" void k(float* y, int64_t n) {
  float acc = INFINITY > 0 ? 0.f : 1.f;
#pragma GCC unroll 4
  for (int64_t i = 0; i < UNROLL * n; ++i) acc += SQUARE(std::sqrt(static_cast<float>(i)));
  y[0] = acc + (INT64_MAX > 0) + (std::numeric_limits<float>::max() > 0) + (kNote[0] == 'n');
  y[1] = static_cast<float>(CHAR_BIT) + M_PI + NAN * 0;
}
)");
  r.defines["UNROLL"] = "8";
  CompileOutput out = compiler_->compile(r);
  EXPECT_TRUE(out.ok) << out.log;
  EXPECT_FALSE(out.rejected);
}

TEST_F(CpuCompilerScan, PreprocessorErrorIsACompileErrorNotARefusal) {
  CompileOutput out = compiler_->compile(request_for("#error UNROLL must be set\n"));
  EXPECT_FALSE(out.ok);
  EXPECT_FALSE(out.rejected);
  EXPECT_NE(out.log.find("UNROLL must be set"), std::string::npos) << out.log;
  EXPECT_FALSE(out.cache_key.empty());  // the source's doing: cacheable
}

}  // namespace
}  // namespace kiln::eval
