// `kiln eval --source` as a user meets it, through the real `kiln` binary on the cpu backend
// (and NVRTC where it loads): a source launches with the seed's geometry by default; with the
// template's, its parameters default to a configuration that meets the constraints; parameters
// that break one get a message naming the constraint, the values it saw and the flag that fixes
// it; --json records the parameters and the launch geometry; --check scans and compiles without
// running anything. The templates' first values break the constraints of several built-in cuda
// targets, which is why the default is the first admitted configuration.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "cli/eval_candidate.h"
#include "evaluator/cuda/cuda_probe.h"
#include "tests/support/test_env.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using testing::kiln_binary;
using testing::run_command;
using testing::TempDir;

class EvalSource : public ::testing::Test {
 protected:
  // A copy of rmsnorm whose cpu template has a constraint its first value breaks: f32 (S=4)
  // needs UNROLL >= 2.
  void SetUp() override {
    testing::copy_builtin_target("rmsnorm", dir_.file("targets"), [](nlohmann::json& spec) {
      spec["backends"]["cpu"]["template"]["constraints"] = {"UNROLL * S >= 8"};
    });
  }

  std::string eval(const std::string& flags) const {
    return kiln_binary() + " eval rmsnorm --backend cpu --shape M=16,N=256 --targets-dir " +
           dir_.file("targets") + " --cache-dir " + dir_.file("cache") + " " + flags;
  }
  std::string source(const std::string& name) const { return dir_.file("targets/rmsnorm/" + name); }

  // Runs `command`; stdout into *out (JSON when asked for), stderr into *err.
  int run_split(const std::string& command, std::string* out, std::string* err) const {
    std::string ignored;
    const int rc = run_command(
        "{ " + command + " > " + dir_.file("stdout") + " 2> " + dir_.file("stderr") + "; }",
        &ignored);
    auto slurp = [](const std::string& p) {
      std::ifstream in(p);
      std::stringstream ss;
      ss << in.rdbuf();
      return ss.str();
    };
    *out = slurp(dir_.file("stdout"));
    *err = slurp(dir_.file("stderr"));
    return rc;
  }

  TempDir dir_;
};

TEST_F(EvalSource, ASourceLaunchesWithTheSeedsGeometryByDefaultAndTheJsonSaysSo) {
  std::string out, err;
  ASSERT_EQ(run_split(eval("--no-time --json --source " + source("seed_cpu.cpp")), &out, &err), 0)
      << out << err;
  EXPECT_NE(err.find("kernel seed_cpu.cpp with the seed's geometry"), std::string::npos) << err;
  nlohmann::json j = nlohmann::json::parse(out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << out;
  EXPECT_EQ(j["outcome"], "verified") << out;
  EXPECT_EQ(j["candidate"]["label"], "seed_cpu.cpp");
  EXPECT_EQ(j["candidate"]["kernel"], "rmsnorm_seed");
  EXPECT_TRUE(j["params"].is_object() && !j["params"].contains("UNROLL")) << j["params"].dump();
  const nlohmann::json& g = j["geometry"];
  EXPECT_EQ(g["from"], "seed") << g.dump();
  EXPECT_EQ(g["shape"], nlohmann::json({{"M", 16}, {"N", 256}})) << g.dump();
  EXPECT_EQ(g["grid"], nlohmann::json({1, 1, 1})) << g.dump();
  EXPECT_EQ(g["block"], nlohmann::json({1, 1, 1})) << g.dump();
  EXPECT_EQ(g["shared_bytes"], 0) << g.dump();
}

TEST_F(EvalSource, TheTemplatesGeometryTakesTheFirstConfigurationThatMeetsTheConstraints) {
  std::string out, err;
  ASSERT_EQ(
      run_split(eval("--no-time --json --geometry template --source " + source("template_cpu.cpp")),
                &out, &err),
      0)
      << out << err;
  EXPECT_NE(err.find("the first configuration that meets the constraints"), std::string::npos)
      << err;
  nlohmann::json j = nlohmann::json::parse(out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << out;
  EXPECT_EQ(j["outcome"], "verified") << out;
  EXPECT_EQ(j["geometry"]["from"], "template");
  EXPECT_EQ(j["candidate"]["kernel"], "rmsnorm");
  EXPECT_EQ(j["params"]["UNROLL"], "2") << j["params"].dump();  // 1, the first value, breaks it
}

TEST_F(EvalSource, ParametersThatBreakAConstraintAreNamedWithTheirValuesAndTheFlagsThatFixThem) {
  std::string output;
  EXPECT_EQ(
      run_command(eval("--source " + source("template_cpu.cpp") + " --params UNROLL=1"), &output),
      2);
  EXPECT_NE(output.find("UNROLL * S >= 8  (UNROLL=1, S=4)"), std::string::npos) << output;
  EXPECT_NE(output.find("M=16,N=256, f32"), std::string::npos) << output;
  EXPECT_NE(output.find("--params UNROLL=2"), std::string::npos) << output;
  EXPECT_NE(output.find("--geometry seed"), std::string::npos) << output;

  // The target's own template: the way out is the seed.
  EXPECT_EQ(run_command(eval("--template --params UNROLL=1"), &output), 2);
  EXPECT_NE(output.find("UNROLL * S >= 8  (UNROLL=1, S=4)"), std::string::npos) << output;
  EXPECT_NE(output.find("evaluate the seed (drop --template and --params)"), std::string::npos)
      << output;

  // The seed's geometry has no template parameters.
  EXPECT_EQ(
      run_command(eval("--source " + source("seed_cpu.cpp") + " --geometry seed --params UNROLL=2"),
                  &output),
      2);
  EXPECT_NE(output.find("drop --geometry seed, or --params"), std::string::npos) << output;
}

TEST_F(EvalSource, ASweepWithASourceSweepsThatSourceOverTheConfigurationsThatMeetTheConstraints) {
  std::string output;
  ASSERT_EQ(run_command(eval("--sweep --source " + source("template_cpu.cpp")), &output), 0)
      << output;
  EXPECT_NE(output.find("with the kernel of template_cpu.cpp"), std::string::npos) << output;
  EXPECT_NE(output.find("3 of 3 configurations verified"), std::string::npos)
      << output;  // UNROLL 2, 4, 8
}

TEST_F(EvalSource, CheckScansAndCompilesEveryDtypeWithoutRunningAnything) {
  std::string output;
  ASSERT_EQ(run_command(eval("--check --source " + source("seed_cpu.cpp")), &output), 0) << output;
  EXPECT_NE(output.find("scan: passed"), std::string::npos) << output;
  EXPECT_NE(output.find("compile f32: ok"), std::string::npos) << output;
  EXPECT_NE(output.find("check: passed"), std::string::npos) << output;
  EXPECT_EQ(output.find("ceilings"), std::string::npos) << output;  // nothing measured, nothing run
  EXPECT_FALSE(fs::exists(dir_.file("cache/ceilings")));
}

TEST_F(EvalSource, CheckReportsAScanFindingWithoutCompilingAndFails) {
  const std::string bad = dir_.write("bad.cpp", R"(#include <cstdint>
#include <thread>
extern "C" void rmsnorm_seed(const T* x, const T* w, T* y, int64_t M, int64_t N, float eps) {
  std::thread t([] {});
  t.join();
}
)");
  std::string out, err;
  EXPECT_EQ(run_split(eval("--check --source " + bad), &out, &err), 1) << out << err;
  EXPECT_NE(out.find("scan: FAILED"), std::string::npos) << out;
  EXPECT_NE(out.find("line 2: include:thread"), std::string::npos) << out;
  EXPECT_EQ(out.find("compile f32"), std::string::npos) << out;

  ASSERT_EQ(run_split(eval("--check --json --source " + bad), &out, &err), 1) << out << err;
  nlohmann::json j = nlohmann::json::parse(out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << out;
  EXPECT_FALSE(j["ok"].get<bool>());
  ASSERT_FALSE(j["scan"].empty());
  EXPECT_EQ(j["scan"][0]["rule"], "include:thread") << j["scan"].dump();
  EXPECT_TRUE(j["compiles"].empty());
}

TEST_F(EvalSource, CheckShowsTheCompileLogOfASourceThatDoesNotCompile) {
  const std::string broken = dir_.write("broken.cpp", R"(#include <cstdint>
extern "C" void rmsnorm_seed(const T* x, const T* w, T* y, int64_t M, int64_t N, float eps) {
  y[0] = undeclared_name;
}
)");
  std::string output;
  EXPECT_EQ(run_command(eval("--check --source " + broken), &output), 1) << output;
  EXPECT_NE(output.find("compile f32: FAILED"), std::string::npos) << output;
  EXPECT_NE(output.find("undeclared_name"), std::string::npos) << output;
  EXPECT_NE(output.find("check: FAILED"), std::string::npos) << output;
}

TEST(EvalSourceCuda, CheckCompilesCudaThroughNvrtcWithoutAGpu) {
#ifdef KILN_HAVE_CUDA
  cuda::CudaProbe p = cuda::probe_cuda();
  if (!p.nvrtc_loaded) GTEST_SKIP() << "NVRTC does not load here: " << p.nvrtc_error;
  TempDir cache;
  std::string output;
  const std::string base =
      kiln_binary() + " eval rmsnorm --backend cuda --arch sm_90a --cache-dir " + cache.path() +
      " --targets-dir " KILN_SOURCE_DIR "/targets --source " KILN_SOURCE_DIR "/targets/rmsnorm/";
  ASSERT_EQ(run_command(base + "seed.cu --check", &output), 0) << output;
  for (const char* d : {"f16", "bf16", "f32"}) {
    EXPECT_NE(output.find(std::string("compile ") + d + ": ok"), std::string::npos) << output;
  }
  EXPECT_NE(output.find("geometry at M=8192,N=8192 (f16): grid [8192,1,1], block [256,1,1]"),
            std::string::npos)
      << output;
  // The template's geometry with no --params: a configuration that meets the constraints (the
  // first values, BLOCK=128 with ELEMS=8, do not).
  ASSERT_EQ(run_command(base + "template.cu --geometry template --check", &output), 0) << output;
  EXPECT_NE(output.find("check: passed"), std::string::npos) << output;
#else
  GTEST_SKIP() << "built without the CUDA backend";
#endif
}

TEST(EvalSourceCuda, ABrokenCudaConstraintIsNamedBeforeAnythingCompiles) {
  std::string output;
  EXPECT_EQ(run_command(kiln_binary() +
                            " eval rmsnorm --backend cuda --template --params ELEMS=64 --dtype f32 "
                            "--check --targets-dir " KILN_SOURCE_DIR "/targets",
                        &output),
            2);
  EXPECT_NE(output.find("ELEMS * S <= 128  (ELEMS=64, S=4)"), std::string::npos) << output;
  EXPECT_NE(output.find("fix: --params "), std::string::npos) << output;
}

// Every built-in template: the configuration --geometry template picks meets the constraints at
// the backend's benchmark shape, although the first values do not for several cuda templates.
TEST(EvalCandidate, TheDefaultTemplateConfigurationOfEveryBuiltInTargetMeetsItsConstraints) {
  Result<std::vector<TargetSpec>> targets = load_targets(testing::builtin_targets_dir());
  ASSERT_TRUE(targets.is_ok()) << targets.status().to_string();
  int first_values_fail = 0;
  for (const TargetSpec& t : *targets) {
    for (const auto& [backend, b] : t.backends) {
      if (!b.tunable) continue;
      const Shape& shape = t.benchmark_for(backend);
      const DType dtype = b.dtypes.front();
      cli::CandidateArgs a;
      a.geometry = "template";
      Result<cli::CandidateChoice> c = cli::choose_candidate(b, a, shape, dtype);
      ASSERT_TRUE(c.is_ok()) << t.name << " " << backend << ": " << c.status().to_string();
      EXPECT_TRUE(cli::failing_constraints(*b.tunable, shape, dtype, c->candidate.params).empty())
          << t.name;
      std::map<std::string, std::string> first = b.tunable->defines;
      for (const auto& [name, values] : b.tunable->space)
        first[name] = std::to_string(values.front());
      first_values_fail += !cli::failing_constraints(*b.tunable, shape, dtype, first).empty();
    }
  }
  EXPECT_GE(first_values_fail, 4);
}

}  // namespace
}  // namespace kiln
