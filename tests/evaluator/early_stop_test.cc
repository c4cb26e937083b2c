// Early stop (CandidateSpec::early_stop_us, from EvaluateTask.early_stop_us): a candidate clearly
// slower than the bar is timed on a few samples only, still with every check of its timed
// outputs, and says so; one faster than the bar is timed in full.
#include <gtest/gtest.h>

#include "tests/evaluator/cpu_seed_fixture.h"

namespace kiln::eval {
namespace {

class EarlyStopTest : public CpuSeedFixture {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(load("rmsnorm"));
    EvaluatorOptions options;
    options.benchmark_override = Shape{{"M", 256}, {"N", 4096}};  // about a millisecond a launch
    options.min_samples = 20;
    options.max_timing_ms = 400;
    evaluator_ = make_evaluator(options);
    ASSERT_NE(evaluator_, nullptr);
  }
  proto::EvaluationResult seed_with_bar(double early_stop_us) {
    CandidateSpec c = cpu_seed();
    c.early_stop_us = early_stop_us;
    return evaluator_->evaluate(c, DType::kF32);
  }
  static const proto::StageReport* stage(const proto::EvaluationResult& r, const char* name) {
    for (const auto& s : r.stages) {
      if (s.name == name) return &s;
    }
    return nullptr;
  }

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
