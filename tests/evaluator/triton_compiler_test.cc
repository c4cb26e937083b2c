// The triton backend's compiler without a GPU: Triton kernels compiled ahead of time for sm_90a by
// the compile worker, into a cubin with Triton's launch metadata; Triton's own errors, kiln's
// refusals (a banned import, a signature the target does not pass, settings that are not
// integers) as compile failures with a log that says why; cache keys that follow the Triton
// version and the settings; and every value of every built-in Triton template's parameters
// compiled.
// Needs Triton for the Python that scripts/bootstrap sets up (or $KILN_TRITON_PYTHON).
#include "evaluator/triton/triton_compiler.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "cli/sweep.h"
#include "evaluator/evaluation.h"
#include "evaluator/scratch_dir.h"
#include "evaluator/triton/triton_binary.h"
#include "shared/process.h"
#include "shared/target_spec.h"
#include "tests/support/test_env.h"
#include "tests/support/triton_add_kernel.h"

namespace kiln::eval {
namespace {

constexpr const char* kAddKernel = testing::kTritonAddKernel;

std::vector<ArgSpec> add_signature(DType d) { return testing::triton_add_signature(d); }

CompileRequest add_request(std::string source = kAddKernel) {
  CompileRequest r;
  r.source = std::move(source);
  r.kernel_name = "add";
  r.defines = {{"BLOCK", "1024"}, {"num_warps", "4"}, {"KILN_DTYPE", "fp16"}};
  r.arch = "sm_90a";
  r.signature = add_signature(DType::kF16);
  return r;
}

class TritonCompilerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Result<std::unique_ptr<TritonCompiler>> c = TritonCompiler::create();
    ASSERT_TRUE(c.is_ok()) << c.status().to_string();
    compiler_ = std::move(c).value();
  }
  std::unique_ptr<TritonCompiler> compiler_;
};

TEST_F(TritonCompilerTest, CompilesAKernelToACubinWithItsLaunchMetadata) {
  CompileRequest r = add_request();
  r.defines["num_warps"] = "8";
  CompileOutput out = compiler_->compile(r);
  ASSERT_TRUE(out.ok) << out.log;
  EXPECT_FALSE(out.cache_key.empty());
  Result<TritonKernel> k = decode_triton_binary(out.binary);
  ASSERT_TRUE(k.is_ok()) << k.status().to_string();
  EXPECT_EQ(k->cubin.substr(0, 4), std::string(1, '\x7f') + "ELF");
  EXPECT_EQ(k->name, "add");
  EXPECT_EQ(k->num_warps, 8u);
  EXPECT_EQ(k->triton_version, compiler_->triton_version());
  // Triton 3.x appends its scratch pointers after the kernel's own parameters.
  EXPECT_LE(k->hidden_args, 4u);
}

TEST_F(TritonCompilerTest, ReportsTritonsOwnErrorWithTheKernelsLine) {
  std::string bad = kAddKernel;
  bad.replace(bad.find("tl.load(x"), 9, "tl.lod(x");
  CompileOutput out = compiler_->compile(add_request(bad));
  EXPECT_FALSE(out.ok);
  EXPECT_FALSE(out.rejected);
  EXPECT_NE(out.log.find("lod"), std::string::npos) << out.log;
  EXPECT_FALSE(out.cache_key.empty()) << "a compile error is the source's: cacheable";
}

TEST_F(TritonCompilerTest, RefusesABannedImportBeforeAnyOfItRuns) {
  testing::TempDir dir;
  const std::string marker = dir.file("imported");
  std::string evil = "import os\nopen('" + marker + "', 'w').write('ran')\n" + kAddKernel;
  CompileOutput out = compiler_->compile(add_request(evil));
  EXPECT_FALSE(out.ok);
  EXPECT_TRUE(out.rejected);
  EXPECT_NE(out.log.find("import:os"), std::string::npos) << out.log;
  EXPECT_NE(out.log.find("identifier:open"), std::string::npos) << out.log;
  EXPECT_FALSE(std::filesystem::exists(marker)) << "the module ran";
}

TEST_F(TritonCompilerTest, SaysWhenTheKernelsParametersAreNotWhatTheTargetPasses) {
  CompileRequest r = add_request();
  r.signature.push_back({ArgSpec::Kind::kFloat32, DType::kF32, "eps"});
  CompileOutput out = compiler_->compile(r);
  EXPECT_FALSE(out.ok);
  EXPECT_NE(out.log.find("takes 4 runtime parameter(s) (x, y, out, N)"), std::string::npos)
      << out.log;
  EXPECT_NE(out.log.find("passes 5"), std::string::npos) << out.log;

  r = add_request();
  r.defines["UNROLL"] = "2";
  out = compiler_->compile(r);
  EXPECT_FALSE(out.ok);
  EXPECT_NE(out.log.find("UNROLL are not constexpr parameters of 'add'"), std::string::npos)
      << out.log;

  r = add_request();
  r.defines.erase("BLOCK");
  out = compiler_->compile(r);
  EXPECT_FALSE(out.ok);
  EXPECT_NE(out.log.find("no value for the constexpr parameter(s) BLOCK"), std::string::npos)
      << out.log;

  r = add_request();
  r.defines["BLOCK"] = "1024.5";
  out = compiler_->compile(r);
  EXPECT_FALSE(out.ok);
  EXPECT_NE(out.log.find("BLOCK=1024.5 is not an integer"), std::string::npos) << out.log;

  r = add_request();
  r.defines["num_warps"] = "3";
  out = compiler_->compile(r);
  EXPECT_FALSE(out.ok);
  EXPECT_NE(out.log.find("num_warps=3 is not a power of two"), std::string::npos) << out.log;
  r.defines["num_warps"] = "4294967300";  // 4 in an int's low bits
  out = compiler_->compile(r);
  EXPECT_FALSE(out.ok);
  EXPECT_NE(out.log.find("num_warps=4294967300 is not a power of two"), std::string::npos)
      << out.log;

  r = add_request();
  r.kernel_name = "mul";
  out = compiler_->compile(r);
  EXPECT_FALSE(out.ok);
  EXPECT_NE(out.log.find("defines no 'mul'"), std::string::npos) << out.log;
}

TEST_F(TritonCompilerTest, TheCacheKeyFollowsTheSettingsAndTheTritonVersion) {
  EXPECT_NE(compiler_->toolchain_version().find("triton " + compiler_->triton_version()),
            std::string::npos);
  CompileRequest a = add_request(), b = add_request();
  b.defines["num_stages"] = "2";
  CompileOutput oa = compiler_->compile(a), ob = compiler_->compile(b);
  ASSERT_TRUE(oa.ok && ob.ok) << oa.log << ob.log;
  EXPECT_NE(oa.cache_key, ob.cache_key);
  EXPECT_EQ(oa.cache_key, compiler_->compile(a).cache_key);
}

// Triton's own launcher compiles a kernel for arguments that are multiples of 16; so does kiln, as
// a second cubin in the binary. The add kernel's fp16 loads: one element per load where N may be
// anything (the mask is per element), 16 bytes per load where N and the addresses are multiples
// of 16. Read in the SASS by the cuobjdump that Triton's package carries.
TEST_F(TritonCompilerTest, CompilesAVariantForArgumentsThatAreMultiplesOf16WithWideLoads) {
  CompileOutput out = compiler_->compile(add_request());
  ASSERT_TRUE(out.ok) << out.log;
  Result<TritonKernel> k = decode_triton_binary(out.binary);
  ASSERT_TRUE(k.is_ok()) << k.status().to_string();
  ASSERT_TRUE(k->divisible.has_value());
  EXPECT_EQ(k->divisible->args, (std::vector<unsigned>{0, 1, 2, 3}))
      << "x, y and out (addresses) and N (an integer)";
  EXPECT_EQ(k->divisible->name, k->name);
  EXPECT_NE(k->divisible->cubin, k->cubin);

  Result<ProcessResult> where = run_process(
      {compiler_->python(), "-c",
       "import os, triton; print(os.path.join(os.path.dirname(triton.__file__), 'backends', "
       "'nvidia', 'bin', 'cuobjdump'), end='')"},
      std::chrono::seconds(60));
  ASSERT_TRUE(where.is_ok() && where->exit_code == 0) << (where.is_ok() ? where->output : "");
  if (!std::filesystem::exists(where->output)) GTEST_SKIP() << "no cuobjdump in Triton's package";
  testing::TempDir dir;
  auto sass = [&](const std::string& cubin, const std::string& name) {
    const std::string path = dir.file(name + ".cubin");
    EXPECT_TRUE(write_file(path, cubin).is_ok());
    Result<ProcessResult> r =
        run_process({where->output, "--dump-sass", path}, std::chrono::seconds(60));
    EXPECT_TRUE(r.is_ok() && r->exit_code == 0) << (r.is_ok() ? r->output : "");
    return r.is_ok() ? r->output : std::string();
  };
  const std::string generic = sass(k->cubin, "generic"),
                    divisible = sass(k->divisible->cubin, "divisible");
  EXPECT_NE(generic.find("LDG.E.U16"), std::string::npos) << generic;
  EXPECT_EQ(generic.find("LDG.E.128"), std::string::npos) << generic;
  EXPECT_NE(divisible.find("LDG.E.128"), std::string::npos) << divisible;
}

TEST(TritonCompilerCreate, SaysHowToGetTritonWhenThePythonHasNone) {
  TritonCompilerOptions o;
  o.python = "/nonexistent/python3";
  Result<std::unique_ptr<TritonCompiler>> c = TritonCompiler::create(o);
  ASSERT_FALSE(c.is_ok());
  EXPECT_EQ(c.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(c.status().message().find("KILN_TRITON_PYTHON"), std::string::npos);
}

TEST(TritonBinary, RoundTripsAndRefusesWhatIsCutShort) {
  TritonKernel k;
  k.cubin = std::string(1, '\x7f') + "ELF" + std::string(3, '\0');
  k.name = "add";
  k.shared_bytes = 1024;
  k.num_warps = 8;
  k.hidden_args = 2;
  k.triton_version = "3.6.0";
  const std::string without = encode_triton_binary(k);
  k.divisible =
      TritonDivisible{std::string(1, '\x7f') + "ELF" + std::string(5, '\1'), "add", 2048, {0, 3}};
  const std::string b = encode_triton_binary(k);
  EXPECT_TRUE(is_triton_binary(b));
  Result<TritonKernel> back = decode_triton_binary(b);
  ASSERT_TRUE(back.is_ok()) << back.status().to_string();
  EXPECT_EQ(back->cubin, k.cubin);
  EXPECT_EQ(back->name, "add");
  EXPECT_EQ(back->shared_bytes, 1024u);
  EXPECT_EQ(back->num_warps, 8u);
  EXPECT_EQ(back->hidden_args, 2u);
  ASSERT_TRUE(back->divisible.has_value());
  EXPECT_EQ(back->divisible->cubin, k.divisible->cubin);
  EXPECT_EQ(back->divisible->name, "add");
  EXPECT_EQ(back->divisible->shared_bytes, 2048u);
  EXPECT_EQ(back->divisible->args, (std::vector<unsigned>{0, 3}));
  Result<TritonKernel> plain = decode_triton_binary(without);
  ASSERT_TRUE(plain.is_ok()) << plain.status().to_string();
  EXPECT_FALSE(plain->divisible.has_value());
  EXPECT_EQ(plain->cubin, k.cubin);
  EXPECT_FALSE(decode_triton_binary(b.substr(0, b.size() - 1)).is_ok());
  EXPECT_FALSE(decode_triton_binary(b + "x").is_ok());
  // A cubin of another Triton major version: its launch convention is not the one kiln follows.
  k.triton_version = "4.0.0";
  Result<TritonKernel> other = decode_triton_binary(encode_triton_binary(k));
  ASSERT_FALSE(other.is_ok());
  EXPECT_NE(other.status().message().find("Triton 3.x"), std::string::npos)
      << other.status().message();
  EXPECT_FALSE(decode_triton_binary(k.cubin).is_ok());
  EXPECT_FALSE(is_triton_binary(k.cubin));
}

// Configurations of the built-in Triton templates that take every value of every parameter at
// least once (in the backend's first dtype;
// BuiltInTargets.TritonSeedsAndTemplatesCompileForEveryDtype covers the dtypes): a value that
// cannot compile is met, in a few compiles per template instead of one per configuration (about two
// seconds each). `kiln targets --check --backend triton` compiles every configuration.
std::vector<std::map<std::string, std::string>> covering(
    const std::vector<std::map<std::string, std::string>>& configs) {
  std::set<std::pair<std::string, std::string>> seen;
  std::vector<std::map<std::string, std::string>> chosen;
  for (const auto& c : configs) {
    bool adds = false;
    for (const auto& kv : c) adds |= seen.insert(kv).second;
    if (adds) chosen.push_back(c);
  }
  return chosen;
}

TEST_F(TritonCompilerTest, EveryValueOfEveryBuiltInTemplateParameterCompiles) {
  Result<std::vector<TargetSpec>> targets = load_targets(testing::builtin_targets_dir());
  ASSERT_TRUE(targets.is_ok()) << targets.status().to_string();
  int compiled = 0;
  for (const TargetSpec& t : *targets) {
    const BackendSpec* b = t.backend("triton");
    if (!b || !b->tunable) continue;
    const DType d = b->dtypes.front();
    const auto all = cli::template_configs(*b->tunable, t.benchmark_for("triton"), d, 0, 1);
    ASSERT_FALSE(all.empty()) << t.name;
    const auto chosen = covering(all);
    EXPECT_LT(chosen.size(), all.size()) << t.name;
    for (const auto& params : chosen) {
      CandidateSpec c = candidate_of(*b->tunable, "", b->tunable->defines);
      for (const auto& [name, value] : params) c.params[name] = value;
      Result<CompileRequest> req = build_compile_request(t, "triton", "sm_90a", c, d);
      ASSERT_TRUE(req.is_ok()) << req.status().to_string();
      CompileOutput out = compiler_->compile(*req);
      EXPECT_TRUE(out.ok) << t.name << " " << cli::format_params(params) << ":\n" << out.log;
      ++compiled;
    }
  }
  EXPECT_GE(compiled, 12);
}

}  // namespace
}  // namespace kiln::eval
