// Engine restart safety against a real redis-server and real ZeroMQ sockets: a search runs with a
// synthetic worker (a DEALER thread that answers every task at once with a time derived from the
// candidate id), is stopped in the middle, and a second Engine on a new Dispatcher rebuilds its
// state from what the first wrote to Redis. The rebuilt populations (elites, counters, crown),
// seen sets, reports, results and pending tasks must equal the original's; the rebuilt search then
// finishes without merging any task twice. Also: a resume refuses a run with other targets or
// another backend, and a new run refuses a database that already holds one.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

#include "coordinator/engine.h"
#include "shared/redis_client.h"
#include "shared/transport.h"
#include "tests/coordinator/describe.h"
#include "tests/coordinator/engine_fixture.h"
#include "tests/support/synthetic_worker.h"
#include "tests/support/test_env.h"

namespace kiln::coordinator {
namespace {

using testing::SyntheticWorker;

class EngineResumeTest : public EngineFixture {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(start_store());
    for (const char* name : {"reduce", "rmsnorm"}) ASSERT_NE(add_target(name), nullptr);
  }
  std::unique_ptr<Dispatcher> dispatcher() { return test_dispatcher(ctx_, *store_); }
  // A worker that answers `limit` tasks, then sets `stop` and holds whatever else it receives:
  // the first engine stops with tasks in flight however quickly the answers came (the dispatcher
  // sends a queued task at the start of its turn, so an instant worker can answer everything
  // sent before the engine looks at `stop`).
  static testing::SyntheticWorkerOptions answers_then_holds(size_t limit, std::atomic<bool>* stop) {
    testing::SyntheticWorkerOptions o;
    o.limit = limit;
    o.stop_after = stop;
    o.hold_after_limit = true;
    return o;
  }

  EngineOptions options() const {
    EngineOptions eo;
    eo.backend = "cpu";
    eo.seed = 7;
    eo.limits.max_proposals_without_gain = 10;
    eo.in_flight_per_target = 3;
    eo.toolchain = "kiln-test";
    return eo;
  }
};

TEST_F(EngineResumeTest, AnEngineRebuiltFromRedisHasTheSameStateAndFinishesTheRun) {
  std::atomic<bool> stop{false};
  auto d1 = dispatcher();
  ASSERT_NE(d1, nullptr);
  Engine first(targets_, *d1, options(), &*store_);
  ASSERT_TRUE(first.begin().is_ok());
  {
    // The built-in cpu targets have small template spaces: the whole search is about 13
    // evaluations, so it is stopped after 6.
    SyntheticWorker worker(ctx_, d1->endpoint(), answers_then_holds(6, &stop));
    Status ran = run_engine(first, stop, 30);
    ASSERT_TRUE(ran.is_ok()) << ran.to_string();
    ASSERT_GE(worker.answered(), 6u);
  }
  ASSERT_FALSE(first.finished());
  ASSERT_GT(first.pending(), 0u) << "the first search was stopped with nothing in flight";

  // A new coordinator process: a new dispatcher, a new engine on the same Redis.
  auto d2 = dispatcher();
  ASSERT_NE(d2, nullptr);
  Engine second(targets_, *d2, options(), &*store_);
  Status resumed = second.resume();
  ASSERT_TRUE(resumed.is_ok()) << resumed.to_string();
  EXPECT_EQ(second.record().id, first.record().id);
  EXPECT_EQ(second.record().starts, 2u);
  EXPECT_EQ(second.pending(), first.pending());
  ASSERT_EQ(second.results().size(), first.results().size());
  for (size_t i = 0; i < first.results().size(); ++i) EXPECT_EQ(second.results()[i], first.results()[i]) << i;
  ASSERT_EQ(second.reports().size(), first.reports().size());
  for (size_t t = 0; t < first.reports().size(); ++t) {
    EXPECT_EQ(describe(second.reports()[t]), describe(first.reports()[t]));
  }
  for (const TargetSpec& t : targets_) {
    SCOPED_TRACE(t.name);
    ASSERT_NE(first.population(t.name), nullptr);
    ASSERT_NE(second.population(t.name), nullptr);
    EXPECT_EQ(describe(*second.population(t.name)), describe(*first.population(t.name)));
    EXPECT_EQ(second.submitted(t.name), first.submitted(t.name));
    EXPECT_FALSE(first.submitted(t.name).empty());
    // The population sets in Redis hold the same members with the same times.
    const Population& pop = *first.population(t.name);
    for (size_t i = 0; i < pop.islands().size(); ++i) {
      auto stored = store_->population_best(t.name, pop.arch(), std::to_string(i), 100);
      ASSERT_TRUE(stored.is_ok()) << stored.status().to_string();
      std::set<std::pair<std::string, double>> want, got(stored->begin(), stored->end());
      for (const Individual& e : pop.island(i).elites()) want.insert({e.id, e.median_us});
      EXPECT_EQ(got, want) << "island " << i;
    }
    // Every submitted candidate has its record.
    for (const std::string& id : first.submitted(t.name)) {
      auto c = store_->get_candidate(id);
      ASSERT_TRUE(c.is_ok() && c->has_value()) << id;
      EXPECT_FALSE((*c)->status.empty());
    }
  }

  // The resumed search finishes, and no task is merged twice across both engines.
  stop.store(false);
  {
    SyntheticWorker worker(ctx_, d2->endpoint(), 1000000, nullptr);
    Status ran = run_engine(second, stop, 40);
    ASSERT_TRUE(ran.is_ok()) << ran.to_string();
  }
  EXPECT_TRUE(second.finished());
  EXPECT_EQ(second.pending(), 0u);
  std::map<std::string, int> per_task, per_candidate;
  for (const auto& r : second.results()) {
    ++per_task[r.task_id];
    ++per_candidate[r.candidate_id];
  }
  for (const auto& [task, n] : per_task) EXPECT_EQ(n, 1) << task;
  for (const auto& [cand, n] : per_candidate) EXPECT_LE(n, 2) << cand;  // a crowned best's re-time
  auto record = read_run_record(*store_);
  ASSERT_TRUE(record.is_ok() && record->has_value());
  EXPECT_EQ((*record)->state, "finished");
  EXPECT_GT((*record)->spent_s, 0);
  // A record edited by hand to a time spent that is no time is refused, not resumed with a
  // budget of 100030 s left.
  const std::string spent = std::to_string((*record)->spent_s);
  for (const char* bad : {"-100000", "nan", "inf"}) {
    ASSERT_TRUE(store_->put_run({{"spent_s", bad}}).is_ok());
    auto edited = read_run_record(*store_);
    ASSERT_FALSE(edited.is_ok()) << bad;
    EXPECT_NE(edited.status().message().find("spent_s"), std::string::npos)
        << edited.status().message();
  }
  ASSERT_TRUE(store_->put_run({{"spent_s", spent}}).is_ok());

  // A resume of the finished run rebuilds it and has nothing to send.
  auto d3 = dispatcher();
  Engine third(targets_, *d3, options(), &*store_);
  ASSERT_TRUE(third.resume().is_ok());
  EXPECT_TRUE(third.finished());
  EXPECT_EQ(third.pending(), 0u);
  EXPECT_EQ(third.results().size(), second.results().size());
  EXPECT_EQ(d3->queued(), 0u);
  for (size_t t = 0; t < second.reports().size(); ++t) {
    EXPECT_EQ(describe(third.reports()[t]), describe(second.reports()[t]));
  }
}

// The dispatcher writes a result to Redis before the engine logs its judgement: a coordinator that
// dies in between leaves a result that no logged step mentions. The resume folds it in (it is not
// evaluated again) and finishes the rest.
TEST_F(EngineResumeTest, AResultInRedisThatWasNeverJudgedIsFoldedIn) {
  std::atomic<bool> stop{false};
  auto d1 = dispatcher();
  ASSERT_NE(d1, nullptr);
  Engine first(targets_, *d1, options(), &*store_);
  ASSERT_TRUE(first.begin().is_ok());
  {
    SyntheticWorker worker(ctx_, d1->endpoint(), answers_then_holds(3, &stop));
    ASSERT_TRUE(first.run(stop, nullptr).is_ok());
  }
  // Play the dispatcher's part for one leased task: its result goes to Redis, its lease away.
  auto leased = store_->expired_leases(std::numeric_limits<int64_t>::max());
  ASSERT_TRUE(leased.is_ok() && !leased->empty()) << "nothing was in flight";
  const std::string task_id = leased->front();
  auto payload = store_->lease_payload(task_id);
  ASSERT_TRUE(payload.is_ok() && payload->has_value());
  auto env = proto::decode(**payload);
  ASSERT_TRUE(env.is_ok());
  const auto& task = std::get<proto::EvaluateTask>(env->body);
  proto::EvaluationResult r;
  r.task_id = task.task_id;
  r.candidate_id = task.candidate_id;
  r.arch = "cpu/test";
  r.outcome = proto::Outcome::kVerified;
  r.timing.median_us = SyntheticWorker::time_of(task.candidate_id);
  ASSERT_TRUE(store_->put_result_once(r.candidate_id, r.arch, proto::encode({proto::kProtocolVersion, r.task_id, r})).is_ok());
  ASSERT_TRUE(store_->release_lease(task_id).is_ok());

  auto d2 = dispatcher();
  Engine second(targets_, *d2, options(), &*store_);
  ASSERT_TRUE(second.resume().is_ok());
  ASSERT_EQ(second.results().size(), first.results().size() + 1);
  EXPECT_EQ(second.results().back(), r);
  stop.store(false);
  std::set<std::string> sent;
  {
    SyntheticWorker worker(ctx_, d2->endpoint(), 1000000, nullptr);
    Status ran = run_engine(second, stop, 40);
    ASSERT_TRUE(ran.is_ok()) << ran.to_string();
    sent = worker.received();
  }
  EXPECT_TRUE(second.finished());
  EXPECT_FALSE(sent.count(task_id)) << "the folded task was evaluated again";
  std::map<std::string, int> per_task;
  for (const auto& res : second.results()) ++per_task[res.task_id];
  for (const auto& [t, n] : per_task) EXPECT_EQ(n, 1) << t;
  // Once judged, it is in the log: a later resume replays it like any other.
  auto d3 = dispatcher();
  Engine third(targets_, *d3, options(), &*store_);
  ASSERT_TRUE(third.resume().is_ok());
  EXPECT_EQ(third.results(), second.results());
}

TEST_F(EngineResumeTest, RefusesToContinueAnotherRun) {
  auto d = dispatcher();
  ASSERT_NE(d, nullptr);
  std::vector<TargetSpec> just_reduce = {targets_[0]};
  Engine first(just_reduce, *d, options(), &*store_);
  ASSERT_TRUE(first.begin().is_ok());

  Engine again(just_reduce, *d, options(), &*store_);
  Status twice = again.begin();
  EXPECT_EQ(twice.code(), StatusCode::kAlreadyExists) << twice.to_string();

  Engine more(targets_, *d, options(), &*store_);
  Status other_targets = more.resume();
  EXPECT_EQ(other_targets.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(other_targets.message().find("rmsnorm"), std::string::npos) << other_targets.to_string();

  EngineOptions cuda = options();
  cuda.backend = "cuda";
  Engine other_backend(just_reduce, *d, cuda, &*store_);
  Status backend = other_backend.resume();
  EXPECT_EQ(backend.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(backend.message().find("cpu backend"), std::string::npos) << backend.to_string();

  EngineOptions islands = options();
  islands.search.islands = 3;
  Engine other_islands(just_reduce, *d, islands, &*store_);
  EXPECT_EQ(other_islands.resume().code(), StatusCode::kFailedPrecondition);
}

TEST_F(EngineResumeTest, NothingToResumeInAnEmptyDatabase) {
  auto d = dispatcher();
  ASSERT_NE(d, nullptr);
  Engine e(targets_, *d, options(), &*store_);
  EXPECT_EQ(e.resume().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace kiln::coordinator
