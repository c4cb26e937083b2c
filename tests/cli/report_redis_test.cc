// `kiln report --redis`: a run read back from its Redis (search log, target standings, run record)
// is the run the engine made -- every result with its verdict, lineage and arrival time -- on a
// real redis-server, dispatcher and a worker that speaks the real protocol.
#include "cli/report_redis.h"

#include <gtest/gtest.h>

#include <atomic>
#include <optional>

#include "cli/status_table.h"
#include "coordinator/engine.h"
#include "report/html.h"
#include "tests/coordinator/describe.h"
#include "tests/support/synthetic_worker.h"
#include "tests/support/test_env.h"

namespace kiln::cli {
namespace {

TEST(ReportRedis, ReadsBackTheRunTheEngineMade) {
  testing::RedisServer server;
  std::optional<redis::RedisClient> client;
  std::optional<redis::Store> store;
  ASSERT_EQ(testing::connect_store(server, &client, &store), "");
  Result<report::RunData> none = load_run_redis(*store, "redis://test");
  ASSERT_FALSE(none.is_ok());
  EXPECT_EQ(none.status().code(), StatusCode::kNotFound);
  EXPECT_NE(none.status().message().find("no kiln run is recorded"), std::string::npos);

  auto t = testing::load_builtin_target("reduce");
  ASSERT_TRUE(t.is_ok());
  zmq::context_t ctx;
  auto d = coordinator::test_dispatcher(ctx, *store);
  ASSERT_NE(d, nullptr);
  coordinator::EngineOptions eo;
  eo.backend = "cpu";
  eo.toolchain = "kiln-test";
  eo.limits.max_proposals_without_gain = 100000;
  coordinator::Engine engine({*t}, *d, eo, &*store);
  std::atomic<bool> stop{false};
  testing::SyntheticWorker worker(ctx, d->endpoint(), 10, &stop);
  ASSERT_TRUE(coordinator::run_engine(engine, stop, 60).is_ok());
  for (const auto& r : engine.reports()) {  // what `kiln run` publishes for `kiln status`
    ASSERT_TRUE(
        store->put_target_status(coordinator::unit_key(r.target, r.gpu_model), status_fields(r))
            .is_ok());
  }

  Result<report::RunData> run = load_run_redis(*store, "redis://test");
  ASSERT_TRUE(run.is_ok()) << run.status().to_string();
  EXPECT_EQ(run->run_id, engine.record().id);
  EXPECT_EQ(run->backend, "cpu");
  EXPECT_EQ(run->export_args, "--redis redis://test");
  const auto& results = engine.results();
  ASSERT_EQ(run->rows.size(), results.size());
  size_t children = 0;
  for (size_t i = 0; i < results.size(); ++i) {
    const report::ResultRow& row = run->rows[i];
    const coordinator::Engine::ResultContext* c = engine.context_of(results[i].task_id);
    ASSERT_NE(c, nullptr);
    EXPECT_EQ(row.task_id, results[i].task_id);
    EXPECT_EQ(row.candidate_id, results[i].candidate_id);
    EXPECT_EQ(row.verdict, coordinator::verdict_name(c->verdict));
    EXPECT_EQ(row.outcome, proto::outcome_name(results[i].outcome));
    EXPECT_DOUBLE_EQ(row.median_us, results[i].timing.median_us);
    EXPECT_EQ(row.parent_id, c->parent_id);
    EXPECT_EQ(row.op, c->op);
    EXPECT_EQ(row.params, c->params);
    EXPECT_DOUBLE_EQ(row.at_s, c->at_s);
    EXPECT_GE(row.at_s, 0);
    EXPECT_EQ(row.evaluator, "synthetic");
    if (row.kind == "child") {
      ++children;
      EXPECT_FALSE(row.parent_id.empty());
    }
  }
  EXPECT_GT(children, 0u);
  ASSERT_EQ(run->units.size(), 1u);
  EXPECT_EQ(run->units[0].best_id, engine.reports()[0].best_id);
  EXPECT_EQ(run->units[0].evaluations, engine.reports()[0].evaluations);
  // And it renders: the chart of time against evaluations has one point per timed result.
  size_t timed = 0;
  for (const auto& r : results) timed += r.timing.median_us > 0;
  const std::string html = report::render_html(*run);
  EXPECT_NE(html.find("data-points=\"" + std::to_string(timed) + "\""), std::string::npos);
}

}  // namespace
}  // namespace kiln::cli
