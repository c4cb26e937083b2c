// The budget holds whatever the evaluators do: with none connected, or with one that takes tasks
// and never answers, the run ends within the grace period after its budget, the targets say why,
// and the abandoned evaluations are counted (real Dispatcher, sockets and redis-server).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <optional>

#include "coordinator/engine.h"
#include "tests/coordinator/describe.h"
#include "tests/coordinator/engine_fixture.h"
#include "tests/support/synthetic_worker.h"
#include "tests/support/test_env.h"

namespace kiln::coordinator {
namespace {

using Clock = std::chrono::steady_clock;

class EngineBudgetTest : public EngineFixture {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(start_store());
    ASSERT_NE(add_target("rmsnorm"), nullptr);
  }
  EngineOptions options() {
    EngineOptions eo;
    eo.backend = "cpu";
    eo.toolchain = "kiln-test";
    eo.budget = std::chrono::seconds(2);
    eo.budget_grace = std::chrono::seconds(1);
    eo.limits.max_proposals_without_gain = 100000;
    return eo;
  }
};

TEST_F(EngineBudgetTest, WithNoEvaluatorTheRunEndsWithinTheGraceAfterItsBudget) {
  auto d = test_dispatcher(ctx_, *store_);
  ASSERT_NE(d, nullptr);
  Engine engine(targets_, *d, options(), &*store_);
  std::atomic<bool> stop{false};
  const auto start = Clock::now();
  Status ran = run_engine(engine, stop, 30);
  const double took = std::chrono::duration<double>(Clock::now() - start).count();
  ASSERT_TRUE(ran.is_ok()) << ran.to_string();
  EXPECT_TRUE(engine.finished());
  // Budget 2 s and grace 1 s: it ends after about 3 s (the margin is for a loaded machine; a run
  // that waited for its evaluation would go on until the test's guard stops it at 30 s).
  EXPECT_LT(took, 10) << "budget 2 s, grace 1 s";
  EXPECT_GE(engine.overrun_s(), 0.9);
  EXPECT_EQ(engine.abandoned(), 1u) << "the seed's task";
  ASSERT_EQ(engine.reports().size(), 1u);
  EXPECT_NE(engine.reports()[0].state.find("stopped: time budget spent"), std::string::npos)
      << engine.reports()[0].state;
  EXPECT_NE(engine.reports()[0].state.find("abandoned"), std::string::npos)
      << engine.reports()[0].state;
}

TEST_F(EngineBudgetTest, AnEvaluatorThatNeverAnswersCannotKeepTheRunPastItsGrace) {
  auto d = test_dispatcher(ctx_, *store_);
  ASSERT_NE(d, nullptr);
  Engine engine(targets_, *d, options(), &*store_);
  std::atomic<bool> stop{false};
  testing::SyntheticWorkerOptions wo;
  wo.limit = 3;  // the seed and two children, then it holds every task and answers none
  wo.hold_after_limit = true;
  testing::SyntheticWorker hung(ctx_, d->endpoint(), wo);
  const auto start = Clock::now();
  Status ran = run_engine(engine, stop, 30);
  const double took = std::chrono::duration<double>(Clock::now() - start).count();
  ASSERT_TRUE(ran.is_ok()) << ran.to_string();
  EXPECT_TRUE(engine.finished());
  EXPECT_LT(took, 10);
  EXPECT_GE(engine.abandoned(), 1u);
  EXPECT_GE(hung.answered(), 1u);
  EXPECT_NE(engine.reports()[0].state.find("abandoned"), std::string::npos)
      << engine.reports()[0].state;
}

}  // namespace
}  // namespace kiln::coordinator
