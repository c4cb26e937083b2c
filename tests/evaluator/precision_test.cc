// The precision stage (docs/threats.md row 10) on the cpu backend: every built-in template
// configuration passes it with the default factor (the factor must admit honest accumulation
// orders), a target can tighten the factor in its spec, and a spec with a meaningless factor is
// refused when it loads.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "evaluator/evaluation.h"
#include "evaluator/toolchain.h"
#include "tests/support/cheat_cases.h"
#include "tests/support/test_env.h"

namespace kiln::eval {
namespace {

proto::EvaluationResult verify(const TargetSpec& target, const KernelSpec& kernel,
                               const std::map<std::string, std::string>& params,
                               const testing::TempDir& dir, Toolchain& toolchain) {
  CandidateSpec c;
  c.label = "template";
  c.source = kernel.source;
  c.kernel_name = kernel.kernel_name;
  c.params = params;
  c.geometry = &kernel;
  EvaluatorOptions options;
  options.kiln_binary = testing::kiln_binary();
  options.cache_dir = dir.path();
  options.time = false;
  auto evaluator = CandidateEvaluator::create(target, "cpu", toolchain.compiler(), options);
  EXPECT_TRUE(evaluator.is_ok()) << evaluator.status().to_string();
  if (!evaluator.is_ok()) return {};
  return (*evaluator)->evaluate(c, target.backend("cpu")->dtypes.front());
}

const proto::StageReport* find_stage(const proto::EvaluationResult& r, const std::string& name) {
  for (const auto& s : r.stages) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

TEST(PrecisionStage, EveryBuiltInCpuTemplateConfigurationPasses) {
  testing::TempDir dir;
  auto toolchain = Toolchain::create("cpu", dir.path());
  ASSERT_TRUE(toolchain.is_ok()) << toolchain.status().to_string();
  int configurations = 0;
  for (const char* name : {"layernorm", "reduce", "rmsnorm", "rotary_embedding", "softmax"}) {
    Result<TargetSpec> target = testing::load_builtin_target(name);
    ASSERT_TRUE(target.is_ok()) << target.status().to_string();
    const BackendSpec* cpu = target->backend("cpu");
    ASSERT_TRUE(cpu != nullptr && cpu->tunable) << name << " has no cpu template";
    const DType dtype = cpu->dtypes.front();
    for_each_config(*cpu->tunable, target->benchmark_for("cpu"), dtype, [&](const auto& params) {
      proto::EvaluationResult r = verify(*target, *cpu->tunable, params, dir, **toolchain);
      const proto::StageReport* p = find_stage(r, "precision");
      EXPECT_EQ(r.outcome, proto::Outcome::kVerified) << name << ": " << r.log << "\n"
                                                      << testing::describe(r);
      EXPECT_TRUE(p != nullptr && p->passed && p->cases > 0)
          << name << ": " << (p ? p->detail : std::string("no precision stage"));
      ++configurations;
      return true;
    });
  }
  EXPECT_GE(configurations, 5);
}

TEST(PrecisionStage, ASpecCanTightenTheFactorAndABadFactorIsRefused) {
  testing::TempDir dir;
  for (const char* f : {"reference.cpp", "seed_cpu.cpp", "target.json"}) {
    std::ifstream in(testing::builtin_targets_dir() + "/rmsnorm/" + f);
    std::stringstream text;
    text << in.rdbuf();
    dir.write(std::string("rms/") + f, text.str());
  }
  nlohmann::json j = nlohmann::json::parse(std::ifstream(dir.file("rms/target.json")));
  j["backends"].erase("cuda");
  j["backends"].erase("triton");
  j["backends"]["cpu"].erase("template");
  j["precision_factor"] = 0.5;
  dir.write("rms/target.json", j.dump());
  Result<TargetSpec> bad = load_target(dir.path() + "/rms");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("precision_factor"), std::string::npos)
      << bad.status().message();

  j["precision_factor"] = 2;
  dir.write("rms/target.json", j.dump());
  Result<TargetSpec> tight = load_target(dir.path() + "/rms");
  ASSERT_TRUE(tight.is_ok()) << tight.status().to_string();
  EXPECT_EQ(tight->precision_factor, 2);
}

// The seed stays loaded in the sandbox child from one evaluation to the next; a candidate that
// kills the child must not leave the next evaluations comparing against a handle of the dead
// child: the seed is loaded again, and the precision cheat is still caught after the crash.
TEST(PrecisionStage, TheSeedIsLoadedAgainAfterACandidateKillsTheSandbox) {
  testing::TempDir dir;
  auto toolchain = Toolchain::create("cpu", dir.path());
  ASSERT_TRUE(toolchain.is_ok()) << toolchain.status().to_string();
  Result<TargetSpec> target = testing::load_builtin_target("rmsnorm");
  ASSERT_TRUE(target.is_ok()) << target.status().to_string();
  EvaluatorOptions options;
  options.kiln_binary = testing::kiln_binary();
  options.cache_dir = dir.path();
  options.time = false;
  auto evaluator = CandidateEvaluator::create(*target, "cpu", (*toolchain)->compiler(), options);
  ASSERT_TRUE(evaluator.is_ok()) << evaluator.status().to_string();
  const KernelSpec& seed = target->backend("cpu")->seed;
  auto evaluate = [&](const std::string& source) {
    CandidateSpec c = candidate_of(seed, "test", seed.defines);
    c.source = source;
    return (*evaluator)->evaluate(c, DType::kF32);
  };
  const std::string drop =
      testing::read_text(testing::source_root() + "/tests/cheats/cpu/precision_drop.cpp");
  ASSERT_FALSE(drop.empty());
  // A copy of the seed under another name: an honest candidate that is compared with the seed.
  std::string honest = seed.source;
  honest += "\nstatic int kiln_test_marker = 0;\n";

  for (int round = 0; round < 2; ++round) {
    proto::EvaluationResult ok = evaluate(honest);
    const proto::StageReport* p = find_stage(ok, "precision");
    EXPECT_EQ(ok.outcome, proto::Outcome::kVerified) << testing::describe(ok);
    EXPECT_TRUE(p != nullptr && p->passed && p->cases > 0)
        << "round " << round << ": " << (p ? p->detail : std::string("no precision stage"));
    proto::EvaluationResult caught = evaluate(drop);
    p = find_stage(caught, "precision");
    EXPECT_EQ(caught.outcome, proto::Outcome::kWrongAnswer) << testing::describe(caught);
    EXPECT_TRUE(p != nullptr && !p->passed)
        << "round " << round << ": " << testing::describe(caught);
    // Kills the sandbox child in the middle of the smoke stage.
    proto::EvaluationResult crashed = evaluate(
        "#include <cstdint>\nextern \"C\" void rmsnorm_seed(const T*, const T*, T*, int64_t, "
        "int64_t, float) { volatile int* p = nullptr; *p = 1; }\n");
    EXPECT_EQ(crashed.outcome, proto::Outcome::kCrash) << testing::describe(crashed);
  }
}

}  // namespace
}  // namespace kiln::eval
