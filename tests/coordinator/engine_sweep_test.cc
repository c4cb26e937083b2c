// Shape sweeps in the engine: one population per (target, shape, GPU model), each task timed at its
// population's shape (real Dispatcher, real sockets, real redis-server, synthetic evaluators that
// speak the real protocol), transfer of neighbours' bests (and a cold start without it), the
// sweep in the run's record and its resume, and an evaluator that does not time at the task's
// shape being refused.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "coordinator/engine.h"
#include "coordinator/run_observer.h"
#include "tests/coordinator/describe.h"
#include "tests/coordinator/engine_fixture.h"
#include "tests/support/synthetic_worker.h"
#include "tests/support/test_env.h"

namespace kiln::coordinator {
namespace {

namespace fs = std::filesystem;
using testing::SyntheticWorker;
using testing::SyntheticWorkerOptions;

constexpr const char* kFastModel = "Test GPU Fast";
constexpr const char* kSlowModel = "Test GPU Slow";

// A landscape over the template's space: the seed is slow; configurations are faster the nearer
// (A, B) is to (7, 6), at every shape, and a larger shape takes longer.
double landscape(const proto::EvaluateTask& t) {
  if (!t.params.count("A")) return 5000;
  const double a = std::stod(t.params.at("A")), b = std::stod(t.params.at("B"));
  double size = 1;
  for (const auto& [d, n] : t.shape) size *= static_cast<double>(n);
  return (100 + 10 * (std::abs(a - 7) + std::abs(b - 6))) * (1 + size / 1e6);
}

class EngineSweepTest : public EngineFixture {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(start_store());
    // reduce with a cpu template of 64 configurations (the synthetic evaluators compile nothing).
    const fs::path dir = fs::path(tmp_.path()) / "reduce";
    fs::copy(testing::builtin_targets_dir() + "/reduce", dir);
    std::ifstream in(dir / "target.json");
    nlohmann::json spec = nlohmann::json::parse(in);
    spec["backends"]["cpu"]["template"]["params"] = {
        {"UNROLL", {4}}, {"A", {1, 2, 3, 4, 5, 6, 7, 8}}, {"B", {1, 2, 3, 4, 5, 6, 7, 8}}};
    std::ofstream(dir / "target.json") << spec.dump(2);
    ASSERT_NE(add_target(dir.string()), nullptr);
    auto sweep = parse_shape_sweep(
        R"({"reduce": [{"M": 64, "N": 256}, {"M": 1024, "N": 1024}, {"M": 4096, "N": 1024}]})",
        targets_);
    ASSERT_TRUE(sweep.is_ok()) << sweep.status().to_string();
    sweep_ = *sweep;
  }
  std::unique_ptr<Dispatcher> dispatcher() { return test_dispatcher(ctx_, *store_); }
  EngineOptions options() const {
    EngineOptions eo;
    eo.backend = "cpu";
    eo.seed = 5;
    eo.limits.max_proposals_without_gain = 10;
    eo.in_flight_per_target = 2;
    eo.toolchain = "kiln-test";
    eo.gpu_models = {kFastModel, kSlowModel};
    eo.shapes = sweep_;
    return eo;
  }
  SyntheticWorkerOptions worker(const char* model, std::atomic<bool>* stop = nullptr,
                                size_t limit = 1000000) {
    SyntheticWorkerOptions w;
    w.gpu_model = model;
    w.worker_id = std::string("w-") + model;
    w.time_fn = landscape;
    w.limit = limit;
    w.stop_after = stop;
    return w;
  }
  // The operators of every child the engine judged, by the unit key of its population.
  std::vector<std::pair<std::string, Engine::ResultContext>> judged(const Engine& e) const {
    std::vector<std::pair<std::string, Engine::ResultContext>> out;
    for (const auto& r : e.results()) {
      const Engine::ResultContext* c = e.context_of(r.task_id);
      if (c) out.emplace_back(unit_key(c->target, c->gpu_model, c->shape), *c);
    }
    return out;
  }

  testing::TempDir tmp_;
  ShapeSweep sweep_;
};

TEST_F(EngineSweepTest, EveryShapeAndModelIsAPopulationTimedAtItsShape) {
  auto d = dispatcher();
  ASSERT_NE(d, nullptr);
  Engine engine(targets_, *d, options(), &*store_);
  std::atomic<bool> stop{false};
  {
    SyntheticWorker fast(ctx_, d->endpoint(), worker(kFastModel));
    SyntheticWorker slow(ctx_, d->endpoint(), worker(kSlowModel));
    {
      Status ran = run_engine(engine, stop, 60);
      ASSERT_TRUE(ran.is_ok()) << ran.to_string();
    }
    ASSERT_TRUE(engine.finished());
    // Every task names its population's shape and model; one configuration at two shapes is two
    // candidates.
    std::map<std::string, std::string> shape_of_id;
    for (SyntheticWorker* w : {&fast, &slow}) {
      for (const proto::EvaluateTask& t : w->tasks()) {
        ASSERT_FALSE(t.shape.empty()) << t.task_id;
        const std::string label = shape_string(t.shape);
        EXPECT_NE(engine.population("reduce", t.gpu_model, label), nullptr) << label;
        auto [it, fresh] = shape_of_id.emplace(t.candidate_id, label);
        if (!fresh) {
          EXPECT_EQ(it->second, label) << "one id at two shapes: " << t.candidate_id;
        }
      }
    }
  }
  const std::vector<std::string> labels = {"M=64,N=256", "M=1024,N=1024", "M=4096,N=1024"};
  ASSERT_EQ(engine.reports().size(), 6u);
  std::set<std::string> keys;
  for (const TargetReport& r : engine.reports()) {
    SCOPED_TRACE(describe(r) + " shape " + r.shape);
    EXPECT_NE(std::find(labels.begin(), labels.end(), r.shape), labels.end());
    EXPECT_GT(r.seed_us, 0);
    EXPECT_LT(r.best_us, r.seed_us);
    // The best was timed at this population's shape: it is near the landscape's optimum there.
    Result<Shape> at = parse_shape_label(r.shape);
    ASSERT_TRUE(at.is_ok());
    proto::EvaluateTask optimum;
    optimum.params = {{"A", "7"}, {"B", "6"}};
    optimum.shape = *at;
    EXPECT_GE(r.best_us, landscape(optimum));
    EXPECT_LE(r.best_us, 1.5 * landscape(optimum));
    keys.insert(unit_key(r.target, r.gpu_model, r.shape));
  }
  // Redis names each population's standing after its shape and model; the run records the sweep.
  auto statuses = store_->target_statuses();
  ASSERT_TRUE(statuses.is_ok()) << statuses.status().to_string();
  std::set<std::string> names;
  for (const auto& [name, fields] : *statuses) names.insert(name);
  EXPECT_EQ(names, keys);
  EXPECT_TRUE(names.count("reduce-M=64,N=256@Test_GPU_Fast")) << ::testing::PrintToString(names);
  auto record = read_run_record(*store_);
  ASSERT_TRUE(record.is_ok() && record->has_value());
  EXPECT_EQ((*record)->shapes.at("reduce"), labels);

  // Transfer: children whose operator names a neighbour, each a configuration that neighbour had
  // crowned before (its best), of the same target and model or the same shape on the other model.
  std::map<std::string, std::set<Params>> crowned;
  size_t transfers = 0;
  for (const auto& [unit, c] : judged(engine)) {
    if (c.verdict == Verdict::kCrowned) crowned[unit].insert(c.params);
  }
  for (const auto& [unit, c] : judged(engine)) {
    if (c.op.rfind("transfer ", 0) != 0) continue;
    ++transfers;
    const std::string from = c.op.substr(9);
    ASSERT_TRUE(keys.count(from)) << c.op;
    EXPECT_NE(from, unit);
    EXPECT_TRUE(crowned[from].count(c.params))
        << unit << " took a configuration " << from << " never crowned";
  }
  EXPECT_GT(transfers, 0u);

  // /metrics: every population is its own series (a shape label), none written twice.
  RunObserver observer({"coordinator", "cpu", 0});
  observer.observe(engine, *d, &*store_);
  std::set<std::string> series;
  std::istringstream lines(observer.metrics_text());
  size_t best_series = 0;
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line[0] == '#') continue;
    const std::string name = line.substr(0, line.rfind(' '));
    EXPECT_TRUE(series.insert(name).second) << "written twice: " << name;
    best_series += name.rfind("kiln_best_time_seconds{", 0) == 0;
  }
  EXPECT_EQ(best_series, 6u);
  EXPECT_TRUE(series.count(
      "kiln_best_time_seconds{target=\"reduce\",gpu_model=\"Test GPU Fast\",shape=\"M=64,N=256\"}"))
      << observer.metrics_text();

  // /status: each population with its shape, and the document still matches the schema.
  EXPECT_EQ(testing::status_schema_problem(observer.status_json()), "");
  const nlohmann::json status = nlohmann::json::parse(observer.status_json());
  std::set<std::string> shapes;
  for (const auto& t : status["targets"]) shapes.insert(t.value("shape", ""));
  EXPECT_EQ(shapes.size(), 3u) << status["targets"].dump();
}

TEST_F(EngineSweepTest, WithoutTransferEveryPopulationStartsCold) {
  auto d = dispatcher();
  EngineOptions eo = options();
  eo.transfer = false;
  Engine engine(targets_, *d, eo, &*store_);
  std::atomic<bool> stop{false};
  SyntheticWorker fast(ctx_, d->endpoint(), worker(kFastModel));
  SyntheticWorker slow(ctx_, d->endpoint(), worker(kSlowModel));
  {
    Status ran = run_engine(engine, stop, 60);
    ASSERT_TRUE(ran.is_ok()) << ran.to_string();
  }
  ASSERT_TRUE(engine.finished());
  size_t children = 0;
  for (const auto& [unit, c] : judged(engine)) {
    EXPECT_NE(c.op.rfind("transfer", 0), 0u) << unit << ": " << c.op;
    children += c.kind == TaskKind::kChild;
  }
  EXPECT_GT(children, 6u);
}

TEST_F(EngineSweepTest, AResumeRebuildsEveryShapesPopulationAndRefusesAnotherSweep) {
  EngineOptions eo = options();
  auto d1 = dispatcher();
  Engine first(targets_, *d1, eo, &*store_);
  ASSERT_TRUE(first.begin().is_ok());
  {
    std::atomic<bool> stop{false};
    SyntheticWorker fast(ctx_, d1->endpoint(), worker(kFastModel, &stop, 20));
    SyntheticWorker slow(ctx_, d1->endpoint(), worker(kSlowModel));
    ASSERT_TRUE(run_engine(first, stop, 30).is_ok());
  }
  auto d2 = dispatcher();
  Engine second(targets_, *d2, eo, &*store_);
  Status resumed = second.resume();
  ASSERT_TRUE(resumed.is_ok()) << resumed.to_string();
  for (const char* model : {kFastModel, kSlowModel}) {
    for (const Shape& s : sweep_.at("reduce")) {
      const std::string label = shape_string(s);
      SCOPED_TRACE(std::string(model) + " " + label);
      ASSERT_NE(second.population("reduce", model, label), nullptr);
      EXPECT_EQ(describe(*second.population("reduce", model, label)),
                describe(*first.population("reduce", model, label)));
      EXPECT_EQ(second.submitted("reduce", model, label), first.submitted("reduce", model, label));
    }
  }
  EngineOptions other = eo;
  other.shapes["reduce"].pop_back();
  Engine third(targets_, *d2, other, &*store_);
  Status refused = third.resume();
  EXPECT_EQ(refused.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.message().find("shapes"), std::string::npos) << refused.to_string();
}

// A finished sweep resumed with a shape added: the run searches again, the new shape's
// populations try their converged neighbours' bests first, and the recorded populations are left
// as they were. The record then holds the larger sweep.
TEST_F(EngineSweepTest, AResumeWithAShapeAddedSearchesItFromItsNeighboursBests) {
  EngineOptions smaller = options();
  smaller.shapes["reduce"].pop_back();  // M=4096,N=1024 comes later
  auto d1 = dispatcher();
  Engine first(targets_, *d1, smaller, &*store_);
  ASSERT_TRUE(first.begin().is_ok());
  {
    std::atomic<bool> stop{false};
    SyntheticWorker fast(ctx_, d1->endpoint(), worker(kFastModel));
    SyntheticWorker slow(ctx_, d1->endpoint(), worker(kSlowModel));
    ASSERT_TRUE(run_engine(first, stop, 60).is_ok());
  }
  ASSERT_TRUE(first.finished());

  auto d2 = dispatcher();
  Engine second(targets_, *d2, options(), &*store_);
  Status resumed = second.resume();
  ASSERT_TRUE(resumed.is_ok()) << resumed.to_string();
  EXPECT_FALSE(second.finished()) << "the added shape has not been searched";
  {
    std::atomic<bool> stop{false};
    SyntheticWorker fast(ctx_, d2->endpoint(), worker(kFastModel));
    SyntheticWorker slow(ctx_, d2->endpoint(), worker(kSlowModel));
    ASSERT_TRUE(run_engine(second, stop, 60).is_ok());
  }
  ASSERT_TRUE(second.finished());
  const std::string added = "M=4096,N=1024";
  for (const char* model : {kFastModel, kSlowModel}) {
    SCOPED_TRACE(model);
    for (const Shape& s : smaller.shapes.at("reduce")) {
      const std::string label = shape_string(s);
      EXPECT_EQ(second.submitted("reduce", model, label), first.submitted("reduce", model, label))
          << label << " was searched again";
    }
    ASSERT_NE(second.population("reduce", model, added), nullptr);
    // Its children: after the seed, the neighbours' bests first.
    std::vector<std::string> ops;
    for (const auto& [unit, c] : judged(second)) {
      if (unit == unit_key("reduce", model, added) && c.kind == TaskKind::kChild)
        ops.push_back(c.op);
    }
    ASSERT_FALSE(ops.empty());
    EXPECT_EQ(ops.front().rfind("transfer", 0), 0u) << ops.front();
  }
  Result<std::optional<RunRecord>> record = read_run_record(*store_);
  ASSERT_TRUE(record.is_ok() && record->has_value());
  EXPECT_EQ((*record)->shapes.at("reduce").size(), 3u);
  EXPECT_EQ((*record)->state, "finished");
}

TEST_F(EngineSweepTest, AnEvaluatorThatTimesAtAnotherShapeIsNotBelieved) {
  auto d = dispatcher();
  EngineOptions eo = options();
  eo.gpu_models = {kFastModel};
  Engine engine(targets_, *d, eo, &*store_);
  std::atomic<bool> stop{false};
  SyntheticWorkerOptions old = worker(kFastModel, &stop, 12);
  old.echo_shape = false;
  SyntheticWorker w(ctx_, d->endpoint(), old);
  ASSERT_TRUE(run_engine(engine, stop, 20).is_ok());
  EXPECT_GT(d->stats().worker_faults, 0u);
  for (const TargetReport& r : engine.reports()) {
    EXPECT_EQ(r.seed_us, 0) << describe(r);  // no time of its was taken as the shape's
  }
}

TEST(ShapeSweep, ParsesListsAndGridsAndSaysWhatIsWrong) {
  auto t = testing::load_builtin_target("rmsnorm");
  ASSERT_TRUE(t.is_ok());
  const std::vector<TargetSpec> targets = {*t};
  auto s = parse_shape_sweep(
      R"({"description": "llama", "rmsnorm": {"shapes": [{"M": 1, "N": 4096}],
          "grid": {"M": [16, 256], "N": [4096, 8192]}}})",
      targets);
  ASSERT_TRUE(s.is_ok()) << s.status().to_string();
  ASSERT_EQ(s->at("rmsnorm").size(), 5u);
  EXPECT_EQ(shape_string(s->at("rmsnorm")[0]), "M=1,N=4096");
  EXPECT_EQ(shape_string(s->at("rmsnorm")[1]), "M=16,N=4096");
  EXPECT_EQ(shape_string(s->at("rmsnorm")[2]), "M=16,N=8192");
  EXPECT_EQ(shape_string(s->at("rmsnorm")[4]), "M=256,N=8192");
  auto back = sweep_from_labels(sweep_labels(*s), targets);
  ASSERT_TRUE(back.is_ok()) << back.status().to_string();
  EXPECT_EQ(*back, *s);
  EXPECT_DOUBLE_EQ(shape_distance({{"M", 16}, {"N", 4096}}, {{"M", 64}, {"N", 2048}}), 3.0);

  const std::vector<std::pair<std::string, std::string>> bad = {
      {"[1]", "JSON object"},
      {"{", "not valid JSON"},
      {R"({"softmax": [{"M": 1, "N": 2}]})", "not a target of this run"},
      {R"({"rmsnorm": [{"M": 1}]})", "dim 'N'"},
      {R"({"rmsnorm": [{"M": 1, "N": 2, "K": 3}]})", "no dim 'K'"},
      {R"({"rmsnorm": [{"M": 0, "N": 2}]})", "positive integer"},
      {R"({"rmsnorm": [{"M": 2147483648, "N": 2}]})", "below 2^31"},
      {R"({"rmsnorm": [{"M": "8", "N": 2}]})", "positive integer"},
      {R"({"rmsnorm": {"grid": {"M": [1, 2]}}})", "dim 'N' missing"},
      {R"({"rmsnorm": {"grid": {"M": [1, 2], "N": [], "Q": [1]}}})", "non-empty list"},
      {R"({"rmsnorm": {"grid": {"M": [1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17],
                                  "N": [1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16]}}})",
       "more than 256"},
      {R"({"rmsnorm": {"shape": []}})", "unknown key 'shape'"},
      {R"({"rmsnorm": []})", "no shapes"},
  };
  for (const auto& [text, why] : bad) {
    auto r = parse_shape_sweep(text, targets);
    ASSERT_FALSE(r.is_ok()) << text;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << text;
    EXPECT_NE(r.status().message().find(why), std::string::npos)
        << text << " -> " << r.status().to_string();
  }
}

}  // namespace
}  // namespace kiln::coordinator
