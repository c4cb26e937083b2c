// Target weights (from `kiln run --plan`, i.e. kiln profile's shares of a program's GPU time)
// steer where evaluations go: with reduce weighted 0.9 and rmsnorm 0.1 most of the first
// evaluations are reduce's, and with the weights swapped most are rmsnorm's (Amdahl allocation
// in the engine; real Dispatcher, sockets and redis-server, a synthetic evaluator).
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <optional>
#include <string>

#include "coordinator/engine.h"
#include "tests/coordinator/describe.h"
#include "tests/coordinator/engine_fixture.h"
#include "tests/support/synthetic_worker.h"
#include "tests/support/test_env.h"

namespace kiln::coordinator {
namespace {

using testing::SyntheticWorker;

class EngineWeightsTest : public EngineFixture {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(start_store());
    for (const char* name : {"reduce", "rmsnorm"}) {
      TargetSpec* t = add_target(name);
      ASSERT_NE(t, nullptr);
      // The built-in cpu spaces hold 3-4 configurations; 200 keep both searches going for the
      // whole test (PAD is a parameter the cpu kernels ignore).
      KernelSpec& tmpl = *t->backends.at("cpu").tunable;
      tmpl.space = {{"UNROLL", {1, 2, 4, 8}}, {"PAD", {}}};
      for (int64_t p = 0; p < 50; ++p) tmpl.space["PAD"].push_back(p);
      tmpl.constraints.clear();
    }
  }

  // Evaluations sent per target in the first `answers` a worker gives, with these weights.
  std::map<std::string, size_t> first_evaluations(const std::map<std::string, double>& weights, size_t answers) {
    auto d = test_dispatcher(ctx_, *store_);
    EXPECT_NE(d, nullptr);
    if (!d) return {};
    EngineOptions eo;
    eo.backend = "cpu";
    eo.seed = 5;
    eo.limits.max_proposals_without_gain = 1000;  // neither converges inside the test
    eo.in_flight_per_target = 4;                 // eight slots for the allocation to share
    eo.toolchain = "kiln-test";
    eo.weights = weights;
    Engine engine(targets_, *d, eo, &*store_);
    EXPECT_TRUE(engine.begin().is_ok());
    std::atomic<bool> stop{false};
    SyntheticWorker worker(ctx_, d->endpoint(), answers, &stop);
    Status ran = run_engine(engine, stop, 30);
    EXPECT_TRUE(ran.is_ok()) << ran.to_string();
    std::map<std::string, size_t> sent;
    for (const proto::EvaluateTask& t : worker.tasks()) ++sent[t.target];
    EXPECT_FALSE(engine.finished());
    EXPECT_TRUE(client_->command({"FLUSHALL"}).is_ok());  // the next engine starts a new run
    return sent;
  }
};

TEST_F(EngineWeightsTest, APlansWeightsSendMostEvaluationsToTheHeavierTarget) {
  constexpr size_t kAnswers = 80;
  std::map<std::string, size_t> reduce_heavy = first_evaluations({{"reduce", 0.9}, {"rmsnorm", 0.1}}, kAnswers);
  std::map<std::string, size_t> rmsnorm_heavy = first_evaluations({{"reduce", 0.1}, {"rmsnorm", 0.9}}, kAnswers);
  auto text = [](const std::map<std::string, size_t>& m) {
    return "reduce " + std::to_string(m.count("reduce") ? m.at("reduce") : 0) + ", rmsnorm " +
           std::to_string(m.count("rmsnorm") ? m.at("rmsnorm") : 0);
  };
  SCOPED_TRACE("reduce 0.9: " + text(reduce_heavy) + "; rmsnorm 0.9: " + text(rmsnorm_heavy));
  // Equal weights would split the slots 4 : 4; 0.9 : 0.1 gives the heavier target 7 of 8.
  EXPECT_GT(reduce_heavy["reduce"], 3 * reduce_heavy["rmsnorm"]);
  EXPECT_GT(rmsnorm_heavy["rmsnorm"], 3 * rmsnorm_heavy["reduce"]);
  EXPECT_GT(reduce_heavy["rmsnorm"], 0u);
}

}  // namespace
}  // namespace kiln::coordinator
