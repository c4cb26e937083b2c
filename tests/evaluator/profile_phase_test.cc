// The profile phase where there is nothing to profile with (the cpu backend, as in CI): the
// evaluation asks the sandbox child for a profile, gets a clear "no profiler" answer, says so once
// in its progress and in the result's profile_note, and is otherwise the same evaluation.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "evaluator/evaluation.h"
#include "evaluator/toolchain.h"
#include "tests/support/test_env.h"

namespace kiln::eval {
namespace {

TEST(ProfilePhase, WithoutAProfilerTheResultSaysWhyAndIsOtherwiseUnchanged) {
  testing::TempDir dir;
  Result<TargetSpec> target = testing::load_builtin_target("rmsnorm");
  ASSERT_TRUE(target.is_ok()) << target.status().to_string();
  auto toolchain = Toolchain::create("cpu", dir.path());
  ASSERT_TRUE(toolchain.is_ok()) << toolchain.status().to_string();
  EvaluatorOptions options;
  options.kiln_binary = testing::kiln_binary();
  options.cache_dir = dir.path();
  options.benchmark_override = Shape{{"M", 64}, {"N", 256}};
  options.min_samples = 10;
  options.max_timing_ms = 100;
  auto evaluator = CandidateEvaluator::create(*target, "cpu", (*toolchain)->compiler(), options);
  ASSERT_TRUE(evaluator.is_ok()) << evaluator.status().to_string();
  const KernelSpec& seed = target->backend("cpu")->seed;
  CandidateSpec c = candidate_of(seed, "seed", seed.defines);

  proto::EvaluationResult plain = (*evaluator)->evaluate(c, DType::kF32);
  ASSERT_EQ(plain.outcome, proto::Outcome::kVerified) << plain.log;
  EXPECT_TRUE(plain.bottleneck.empty());
  EXPECT_TRUE(plain.profile_note.empty());  // not asked for: no profile, no note

  c.profile = true;
  std::vector<std::string> progress;
  proto::EvaluationResult r =
      (*evaluator)->evaluate(c, DType::kF32, [&](const std::string& l) { progress.push_back(l); });
  ASSERT_EQ(r.outcome, proto::Outcome::kVerified) << r.log;
  EXPECT_GT(r.timing.samples, 0u);
  EXPECT_EQ(r.stages.size(), plain.stages.size());
  EXPECT_TRUE(r.bottleneck.empty());
  EXPECT_NE(r.profile_note.find("the cpu backend has no profiler"), std::string::npos)
      << r.profile_note;
  for (const auto& [key, value] : r.metrics) EXPECT_NE(key.rfind("prof.", 0), 0u) << key;
  int said = 0;
  for (const std::string& line : progress) said += line.rfind("profile: none", 0) == 0;
  EXPECT_EQ(said, 1);
}

}  // namespace
}  // namespace kiln::eval
