// Early stop (CandidateSpec::early_stop_us, from EvaluateTask.early_stop_us): a candidate clearly
// slower than the bar is timed on a few samples only, still with every check of its timed
// outputs, and says so; one faster than the bar is timed in full.
#include <gtest/gtest.h>

#include "evaluator/evaluation.h"
#include "evaluator/toolchain.h"
#include "tests/support/test_env.h"

namespace kiln::eval {
namespace {

class EarlyStopTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto t = load_target(KILN_SOURCE_DIR "/targets/rmsnorm");
    ASSERT_TRUE(t.is_ok()) << t.status().to_string();
    target_ = std::move(t).value();
    auto toolchain = Toolchain::create("cpu", dir_.path());
    ASSERT_TRUE(toolchain.is_ok()) << toolchain.status().to_string();
    toolchain_ = std::move(toolchain).value();
    EvaluatorOptions options;
    options.kiln_binary = testing::kiln_binary();
    options.cache_dir = dir_.path();
    options.benchmark_override = Shape{{"M", 256}, {"N", 4096}};  // about a millisecond a launch
    options.min_samples = 20;
    options.max_timing_ms = 400;
    auto e = CandidateEvaluator::create(target_, "cpu", toolchain_->compiler(), options);
    ASSERT_TRUE(e.is_ok()) << e.status().to_string();
    evaluator_ = std::move(e).value();
  }
  proto::EvaluationResult seed_with_bar(double early_stop_us) {
    const KernelSpec& seed = target_.backend("cpu")->seed;
    CandidateSpec c{"seed", seed.source, seed.kernel_name, seed.defines, &seed};
    c.early_stop_us = early_stop_us;
    return evaluator_->evaluate(c, DType::kF32);
  }
  static const proto::StageReport* stage(const proto::EvaluationResult& r, const char* name) {
    for (const auto& s : r.stages) {
      if (s.name == name) return &s;
    }
    return nullptr;
  }

  testing::TempDir dir_;
  TargetSpec target_;
  std::unique_ptr<Toolchain> toolchain_;
  std::unique_ptr<CandidateEvaluator> evaluator_;
};

TEST_F(EarlyStopTest, AClearlySlowerCandidateIsTimedOnAFewSamplesWithEveryCheck) {
  proto::EvaluationResult full = seed_with_bar(0);
  ASSERT_EQ(full.outcome, proto::Outcome::kVerified) << full.log;
  EXPECT_FALSE(full.timing.stopped_early);
  EXPECT_GE(full.timing.samples, 20u);

  // A bar at a tenth of its time: the seed is clearly slower, its timing stops after the first
  // samples (and the round of input sets they started).
  proto::EvaluationResult slow = seed_with_bar(full.timing.median_us / 10);
  ASSERT_EQ(slow.outcome, proto::Outcome::kVerified) << slow.log;
  EXPECT_TRUE(slow.timing.stopped_early);
  EXPECT_GE(slow.timing.samples, 5u);
  EXPECT_LT(slow.timing.samples, 20u);
  EXPECT_GT(slow.timing.min_us, full.timing.median_us / 10);
  const proto::StageReport* timing = stage(slow, "timing");
  ASSERT_NE(timing, nullptr);
  EXPECT_NE(timing->detail.find("stopped early"), std::string::npos) << timing->detail;
  const proto::StageReport* outputs = stage(slow, "timed_outputs");
  ASSERT_NE(outputs, nullptr);  // the closing and kept launches are still checked
  EXPECT_TRUE(outputs->passed) << outputs->detail;
  EXPECT_GE(outputs->cases, 2u);

  // A bar far above its time: timed in full.
  proto::EvaluationResult fast = seed_with_bar(full.timing.median_us * 20);
  ASSERT_EQ(fast.outcome, proto::Outcome::kVerified) << fast.log;
  EXPECT_FALSE(fast.timing.stopped_early);
  EXPECT_GE(fast.timing.samples, 20u);
}

}  // namespace
}  // namespace kiln::eval
