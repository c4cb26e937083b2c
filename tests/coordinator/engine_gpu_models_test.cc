// Populations per GPU model: an engine searching on two models sends each model's tasks only to
// evaluators of that model (real Dispatcher, real sockets, real redis-server), keeps one
// population per (target, model) whose times come from that model alone, and -- when it discovers
// its models from the evaluators that connect -- rebuilds both models' populations on a resume.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "coordinator/engine.h"
#include "tests/coordinator/describe.h"
#include "tests/coordinator/engine_fixture.h"
#include "tests/support/synthetic_worker.h"
#include "tests/support/test_env.h"

namespace kiln::coordinator {
namespace {

using testing::SyntheticWorker;
using testing::SyntheticWorkerOptions;

constexpr const char* kFast = "Test GPU Fast";
constexpr const char* kSlow = "Test GPU Slow";

class EngineGpuModelsTest : public EngineFixture {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(start_store());
    ASSERT_NE(add_target("reduce"), nullptr);
  }
  std::unique_ptr<Dispatcher> dispatcher() { return test_dispatcher(ctx_, *store_); }
  EngineOptions options() const {
    EngineOptions eo;
    eo.backend = "cpu";
    eo.seed = 3;
    eo.limits.max_proposals_without_gain = 6;
    eo.in_flight_per_target = 2;
    eo.toolchain = "kiln-test";
    return eo;
  }
  SyntheticWorkerOptions worker(const char* model, double scale, std::atomic<bool>* stop = nullptr,
                                size_t limit = 1000000) {
    SyntheticWorkerOptions w;
    w.gpu_model = model;
    w.worker_id = std::string("w-") + model;
    w.time_scale = scale;
    w.limit = limit;
    w.stop_after = stop;
    return w;
  }
  void run(Engine& e, std::atomic<bool>& stop, int seconds) {
    Status ran = run_engine(e, stop, seconds);
    ASSERT_TRUE(ran.is_ok()) << ran.to_string();
  }
};

TEST_F(EngineGpuModelsTest, EachModelsTasksGoOnlyToItsEvaluatorsAndItsPopulationHoldsItsTimes) {
  auto d = dispatcher();
  ASSERT_NE(d, nullptr);
  EngineOptions eo = options();
  eo.gpu_models = {kFast, kSlow};
  Engine engine(targets_, *d, eo, &*store_);
  std::atomic<bool> stop{false};
  SyntheticWorker fast(ctx_, d->endpoint(), worker(kFast, 1.0));
  SyntheticWorker slow(ctx_, d->endpoint(), worker(kSlow, 3.0));
  run(engine, stop, 40);
  ASSERT_TRUE(engine.finished());

  for (SyntheticWorker* w : {&fast, &slow}) {
    const std::string model = w == &fast ? kFast : kSlow;
    ASSERT_FALSE(w->tasks().empty()) << model;
    for (const auto& t : w->tasks()) EXPECT_EQ(t.gpu_model, model) << t.task_id;
  }
  // Two populations of reduce, each judged on its own model's times.
  const Population* pf = engine.population("reduce", kFast);
  const Population* ps = engine.population("reduce", kSlow);
  ASSERT_NE(pf, nullptr);
  ASSERT_NE(ps, nullptr);
  EXPECT_EQ(engine.population("reduce"), nullptr);  // no population fed by any model
  EXPECT_NE(pf->arch(), ps->arch());
  ASSERT_EQ(engine.reports().size(), 2u);
  for (const TargetReport& r : engine.reports()) {
    ASSERT_GT(r.seed_us, 0) << r.gpu_model;
    const double scale = r.gpu_model == kFast ? 1.0 : 3.0;
    for (const Individual& e : (r.gpu_model == kFast ? pf : ps)->island(0).elites()) {
      // Candidate ids name the model, so a time can only have come from that model's worker.
      EXPECT_DOUBLE_EQ(e.median_us, SyntheticWorker::time_of(e.id) * scale) << r.gpu_model << " " << e.id;
    }
  }
  // The same configuration on two models is two candidates: no id was sent to both.
  std::set<std::string> fast_ids;
  for (const auto& t : fast.tasks()) fast_ids.insert(t.candidate_id);
  for (const auto& t : slow.tasks()) EXPECT_FALSE(fast_ids.count(t.candidate_id)) << t.candidate_id;
  // Redis names each population's standing after its model.
  auto statuses = store_->target_statuses();
  ASSERT_TRUE(statuses.is_ok()) << statuses.status().to_string();
  std::set<std::string> names;
  for (const auto& [name, fields] : *statuses) names.insert(name);
  EXPECT_EQ(names, (std::set<std::string>{"reduce@Test_GPU_Fast", "reduce@Test_GPU_Slow"}));
  auto record = read_run_record(*store_);
  ASSERT_TRUE(record.is_ok() && record->has_value());
  EXPECT_EQ((*record)->gpu_models, (std::vector<std::string>{kFast, kSlow}));
}

TEST_F(EngineGpuModelsTest, ADiscoveringEngineAddsAModelWhenItsFirstEvaluatorConnectsAndResumesBoth) {
  EngineOptions eo = options();
  eo.gpu_models = {};
  eo.discover_gpu_models = true;
  auto d1 = dispatcher();
  ASSERT_NE(d1, nullptr);
  Engine first(targets_, *d1, eo, &*store_);
  ASSERT_TRUE(first.begin().is_ok());
  EXPECT_FALSE(first.finished());  // nothing to search before an evaluator brings a model
  EXPECT_TRUE(first.reports().empty());
  {
    std::atomic<bool> stop{false};
    // The fast worker answers three tasks and then holds the rest, so its model's search cannot
    // finish (and end the run) before the slow worker has connected.
    SyntheticWorkerOptions fo = worker(kFast, 1.0, &stop, 3);
    fo.hold_after_limit = true;
    SyntheticWorker fast(ctx_, d1->endpoint(), fo);
    run(first, stop, 20);
    ASSERT_EQ(first.gpu_models(), std::vector<std::string>{kFast});
    std::atomic<bool> stop2{false};
    SyntheticWorker slow(ctx_, d1->endpoint(), worker(kSlow, 3.0, &stop2, 3));
    run(first, stop2, 20);
  }
  ASSERT_EQ(first.gpu_models(), (std::vector<std::string>{kFast, kSlow}));
  ASSERT_NE(first.population("reduce", kSlow), nullptr);
  ASSERT_FALSE(first.submitted("reduce", kSlow).empty());

  // A restarted coordinator rebuilds both models' populations before any evaluator connects.
  auto d2 = dispatcher();
  Engine second(targets_, *d2, eo, &*store_);
  Status resumed = second.resume();
  ASSERT_TRUE(resumed.is_ok()) << resumed.to_string();
  ASSERT_EQ(second.gpu_models(), first.gpu_models());
  for (const char* model : {kFast, kSlow}) {
    SCOPED_TRACE(model);
    ASSERT_NE(second.population("reduce", model), nullptr);
    EXPECT_EQ(describe(*second.population("reduce", model)), describe(*first.population("reduce", model)));
    EXPECT_EQ(second.submitted("reduce", model), first.submitted("reduce", model));
  }
  ASSERT_EQ(second.reports().size(), first.reports().size());
  for (size_t i = 0; i < first.reports().size(); ++i) {
    EXPECT_EQ(describe(second.reports()[i]), describe(first.reports()[i]));
  }
}

TEST_F(EngineGpuModelsTest, AResumeOnOtherGpuModelsIsRefused) {
  auto d = dispatcher();
  EngineOptions eo = options();
  eo.gpu_models = {kFast};
  Engine first(targets_, *d, eo, &*store_);
  ASSERT_TRUE(first.begin().is_ok());
  eo.gpu_models = {kSlow};
  Engine other(targets_, *d, eo, &*store_);
  Status s = other.resume();
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find(kFast), std::string::npos) << s.to_string();
  EXPECT_NE(s.message().find(kSlow), std::string::npos) << s.to_string();
}

}  // namespace
}  // namespace kiln::coordinator
