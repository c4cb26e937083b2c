// Timing at a shape of a sweep (CandidateSpec::shape, from EvaluateTask.shape): the evaluator times
// the candidate there (its arena grows to fit, and stays grown), echoes the shape in the result,
// and refuses a shape that does not fit the target or the arena limit without blaming a worker.
#include <gtest/gtest.h>

#include "tests/evaluator/cpu_seed_fixture.h"

namespace kiln::eval {
namespace {

class TimingShapeTest : public CpuSeedFixture {
 protected:
  void SetUp() override { ASSERT_NO_FATAL_FAILURE(load("rmsnorm")); }
  std::unique_ptr<CandidateEvaluator> evaluator(size_t max_arena = 0) {
    EvaluatorOptions options;
    options.benchmark_override = Shape{{"M", 64}, {"N", 256}};  // a small arena to start with
    options.min_samples = 10;
    options.max_timing_ms = 200;
    options.max_arena_bytes = max_arena;
    return make_evaluator(options);
  }
  proto::EvaluationResult seed_at(CandidateEvaluator& e, std::optional<Shape> shape) {
    CandidateSpec c = cpu_seed();
    c.shape = std::move(shape);
    return e.evaluate(c, DType::kF32);
  }
};

TEST_F(TimingShapeTest, TimesAtTheTasksShapeAndEchoesIt) {
  auto e = evaluator();
  ASSERT_NE(e, nullptr);
  const Shape big = {{"M", 512}, {"N", 4096}};  // 128x the elements: the arena must grow
  proto::EvaluationResult r = seed_at(*e, big);
  ASSERT_EQ(r.outcome, proto::Outcome::kVerified) << r.log;
  EXPECT_EQ(r.shape, big);
  proto::EvaluationResult small = seed_at(*e, Shape{{"M", 64}, {"N", 256}});
  ASSERT_EQ(small.outcome, proto::Outcome::kVerified) << small.log;
  EXPECT_GT(r.timing.median_us, 10 * small.timing.median_us)
      << "128x the work timed in " << r.timing.median_us << " us against "
      << small.timing.median_us;
  proto::EvaluationResult plain = seed_at(*e, std::nullopt);  // the benchmark shape, no echo
  ASSERT_EQ(plain.outcome, proto::Outcome::kVerified) << plain.log;
  EXPECT_TRUE(plain.shape.empty());
}

TEST_F(TimingShapeTest, RefusesAShapeTheTargetOrTheArenaLimitCannotTake) {
  auto e = evaluator(64 << 20);
  ASSERT_NE(e, nullptr);
  const std::vector<std::pair<Shape, std::string>> bad = {
      {{{"M", 64}}, "dim 'N'"},
      {{{"M", 64}, {"N", 256}, {"K", 3}}, "no dim 'K'"},
      {{{"M", 0}, {"N", 256}}, "positive integer"},
      {{{"M", 65536}, {"N", 8192}}, "more than this evaluator's limit"},
  };
  for (const auto& [shape, why] : bad) {
    proto::EvaluationResult r = seed_at(*e, shape);
    EXPECT_EQ(r.outcome, proto::Outcome::kInternalError) << shape_string(shape);
    EXPECT_FALSE(r.worker_fault) << shape_string(shape);  // the same at every evaluator
    EXPECT_NE(r.log.find(why), std::string::npos) << shape_string(shape) << ": " << r.log;
  }
  // The evaluator goes on.
  EXPECT_EQ(seed_at(*e, Shape{{"M", 128}, {"N", 512}}).outcome, proto::Outcome::kVerified);
}

}  // namespace
}  // namespace kiln::eval
