// Early stop from the coordinator's side: each child's task carries its parent's time times
// EngineOptions::kEarlyStopFactor as early_stop_us (real Dispatcher, sockets and redis-server;
// a synthetic evaluator through the real link); seeds and re-times carry none, nor does any task
// with early_stop off.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <set>

#include "coordinator/engine.h"
#include "tests/coordinator/describe.h"
#include "tests/coordinator/engine_fixture.h"
#include "tests/support/synthetic_worker.h"
#include "tests/support/test_env.h"

namespace kiln::coordinator {
namespace {

using testing::SyntheticWorker;

class EngineEarlyStopTest : public EngineFixture {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(start_store());
    ASSERT_NE(add_target("reduce"), nullptr);
  }
  // Runs a search on one synthetic cpu evaluator; returns every task it received, in order.
  std::vector<proto::EvaluateTask> search(bool early_stop) {
    auto d = test_dispatcher(ctx_, *store_);
    EXPECT_NE(d, nullptr);
    if (!d) return {};
    EngineOptions eo;
    eo.backend = "cpu";
    eo.seed = 5;
    eo.limits.max_proposals_without_gain = 6;
    eo.in_flight_per_target = 2;
    eo.toolchain = "kiln-test";
    eo.early_stop = early_stop;
    Engine engine(targets_, *d, eo, &*store_);
    std::atomic<bool> stop{false};
    SyntheticWorker w(ctx_, d->endpoint(), 1000000, &stop);
    Status ran = run_engine(engine, stop, 30);
    EXPECT_TRUE(ran.is_ok()) << ran.to_string();
    EXPECT_TRUE(engine.finished());
    return w.tasks();
  }
};

TEST_F(EngineEarlyStopTest, AChildIsTimedUntilItIsClearlySlowerThanItsParent) {
  const std::vector<proto::EvaluateTask> tasks = search(true);
  ASSERT_GE(tasks.size(), 3u);
  EXPECT_EQ(tasks.front().early_stop_us, 0) << "the seed is timed in full";
  std::set<std::string> seen;
  std::vector<double> reported;  // the times of candidates sent before (each a possible parent)
  size_t children = 0;
  for (const proto::EvaluateTask& t : tasks) {
    const bool retime = seen.count(t.candidate_id) > 0;
    if (retime || &t == &tasks.front()) {
      EXPECT_EQ(t.early_stop_us, 0) << t.task_id << (retime ? ": a re-time" : ": the seed");
    } else {
      ++children;
      bool of_a_parent = false;
      for (double us : reported)
        of_a_parent |= std::fabs(t.early_stop_us - us * EngineOptions::kEarlyStopFactor) < 1e-9;
      EXPECT_TRUE(of_a_parent) << t.task_id << ": early_stop_us " << t.early_stop_us
                               << " is not 1.1x the time of any candidate sent before";
    }
    if (seen.insert(t.candidate_id).second)
      reported.push_back(SyntheticWorker::time_of(t.candidate_id));
  }
  EXPECT_GE(children, 2u);  // the cpu template of reduce: a seed and its configurations
}

TEST_F(EngineEarlyStopTest, OffEveryTaskIsTimedInFull) {
  const std::vector<proto::EvaluateTask> tasks = search(false);
  ASSERT_GE(tasks.size(), 3u);
  for (const proto::EvaluateTask& t : tasks) EXPECT_EQ(t.early_stop_us, 0) << t.task_id;
}

}  // namespace
}  // namespace kiln::coordinator
