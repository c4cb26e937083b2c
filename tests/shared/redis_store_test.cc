// Tests of the key layout (redis_keys.h) and of Store's grouped reads and writes against a real
// redis-server: schema version, sources, write-once results, candidates, leases, event streams.
#include "shared/redis_store.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <thread>

#include "shared/hash.h"
#include "shared/redis_keys.h"
#include "tests/support/test_env.h"

namespace kiln::redis {
namespace {

TEST(RedisKeys, BuildsTheDocumentedLayout) {
  EXPECT_EQ(keys::schema_version(), "kiln:schema");
  EXPECT_EQ(keys::kSchemaVersion, 1);
  EXPECT_EQ(keys::target("gemm"), "kiln:target:gemm");
  EXPECT_EQ(keys::population("gemm", "sm_90", "0"), "kiln:pop:gemm:sm_90:0");
  EXPECT_EQ(keys::candidate("c1"), "kiln:cand:c1");
  EXPECT_EQ(keys::source("ab12"), "kiln:src:ab12");
  EXPECT_EQ(keys::binary("ab12", "sm_90"), "kiln:bin:ab12:sm_90");
  EXPECT_EQ(keys::result("c1", "sm_90"), "kiln:result:c1:sm_90");
  EXPECT_EQ(keys::lease("t7"), "kiln:lease:t7");
  EXPECT_EQ(keys::inflight(), "kiln:inflight");
  EXPECT_EQ(keys::events("run-3"), "kiln:events:run-3");
}

TEST(RedisKeys, RejectsComponentsThatWouldBreakTheLayout) {
  for (std::string bad :
       {std::string("a:b"), std::string(""), std::string("a b"), std::string("a\tb"),
        std::string("a\nb"), std::string("a\0b", 3), std::string("a*"), std::string("a?"),
        std::string("[a]"), std::string(keys::kMaxComponentBytes + 1, 'x')}) {
    SCOPED_TRACE(bad);
    Status status = keys::validate_key_component(bad);
    EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  }
  EXPECT_NE(keys::validate_key_component("a:b").message().find("':'"), std::string::npos);
  for (const std::string& good : {std::string("gemm_bf16"), std::string("sm_90a"), std::string("0"),
                                  std::string("run-2024.05.01"), std::string(64, 'f')}) {
    EXPECT_TRUE(keys::validate_key_component(good).is_ok()) << good;
  }
}

class RedisStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!server_.started()) GTEST_SKIP() << "redis-server did not start: " << server_.error();
    RedisOptions options;
    options.url = "unix://" + server_.socket_path();
    // The socket file appears just before redis-server listens: retry while refused.
    Result<RedisClient> client = RedisClient::connect(options);
    for (int i = 0; i < 200 && client.status().code() == StatusCode::kUnavailable; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      client = RedisClient::connect(options);
    }
    ASSERT_TRUE(client.is_ok()) << client.status().to_string();
    client_.emplace(std::move(client).value());
    store_.emplace(*client_);
  }

  Reply run(const std::vector<std::string>& args) {
    Result<Reply> reply = client_->command(args);
    EXPECT_TRUE(reply.is_ok()) << reply.status().to_string();
    return reply.is_ok() ? *reply : Reply();
  }

  kiln::testing::RedisServer server_;
  std::optional<RedisClient> client_;
  std::optional<Store> store_;
};

CandidateRecord candidate(const std::string& id, const std::string& island = "0") {
  CandidateRecord record;
  record.id = id;
  record.source_hash = sha256_hex("source of " + id);
  record.params = R"({"block":128})";
  record.parent = "base";
  record.operator_name = "tile";
  record.generation = 3;
  record.island = island;
  record.status = "measured";
  return record;
}

TEST_F(RedisStoreTest, InitSchemaTwiceIsOk) {
  ASSERT_TRUE(store_->init_schema().is_ok());
  ASSERT_TRUE(store_->init_schema().is_ok());
  EXPECT_EQ(run({"GET", "kiln:schema"}).str, "1");
}

TEST_F(RedisStoreTest, InitSchemaRejectsAnotherVersion) {
  run({"SET", "kiln:schema", "2"});
  Status status = store_->init_schema();
  EXPECT_EQ(status.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(status.message().find("holds layout version '2' but this kiln uses version 1"),
            std::string::npos)
      << status.message();
  EXPECT_NE(status.message().find("empty database"), std::string::npos);
  EXPECT_EQ(run({"GET", "kiln:schema"}).str, "2");
}

TEST_F(RedisStoreTest, PutSourceDeduplicatesByHash) {
  const std::string text = "__global__ void k() {}";
  Result<std::string> first = store_->put_source(text);
  Result<std::string> second = store_->put_source(text);
  ASSERT_TRUE(first.is_ok() && second.is_ok());
  EXPECT_EQ(*first, sha256_hex(text));
  EXPECT_EQ(*first, *second);
  EXPECT_EQ(run({"DBSIZE"}).integer, 1);
  EXPECT_EQ(store_->get_source(*first).value(), text);
  EXPECT_EQ(store_->get_source(sha256_hex("other")).value(), std::nullopt);
  EXPECT_EQ(store_->get_source("a:b").status().code(), StatusCode::kInvalidArgument);
}

TEST_F(RedisStoreTest, PutResultOnceKeepsTheFirstValue) {
  const std::string first("\x81\xa4time\xcb\0\0", 9);  // msgpack-like bytes with NULs
  ASSERT_TRUE(store_->put_result_once("c1", "sm_90", first).is_ok());
  Status again = store_->put_result_once("c1", "sm_90", "second");
  EXPECT_EQ(again.code(), StatusCode::kAlreadyExists);
  EXPECT_NE(again.message().find("kiln:result:c1:sm_90"), std::string::npos);
  EXPECT_EQ(store_->get_result("c1", "sm_90").value(), first);
  EXPECT_EQ(store_->get_result("c1", "sm_80").value(), std::nullopt);
}

TEST_F(RedisStoreTest, AddCandidateWritesHashAndPopulationTogether) {
  CandidateRecord record = candidate("c1");
  ASSERT_TRUE(store_->add_candidate(record, {"gemm", "sm_90", "0"}, 12.5).is_ok());
  EXPECT_EQ(run({"ZSCORE", "kiln:pop:gemm:sm_90:0", "c1"}).str, "12.5");
  Result<std::optional<CandidateRecord>> stored = store_->get_candidate("c1");
  ASSERT_TRUE(stored.is_ok()) << stored.status().to_string();
  ASSERT_TRUE(stored->has_value());
  const CandidateRecord& got = **stored;
  EXPECT_EQ(got.id, "c1");
  EXPECT_EQ(got.source_hash, record.source_hash);
  EXPECT_EQ(got.params, record.params);
  EXPECT_EQ(got.parent, "base");
  EXPECT_EQ(got.operator_name, "tile");
  EXPECT_EQ(got.generation, 3);
  EXPECT_EQ(got.island, "0");
  EXPECT_EQ(got.status, "measured");
  EXPECT_EQ(run({"HGET", "kiln:cand:c1", "operator"}).str, "tile");
  EXPECT_EQ(store_->get_candidate("c2").value(), std::nullopt);
}

TEST_F(RedisStoreTest, AddCandidateRejectsBadInputBeforeWritingAnything) {
  EXPECT_EQ(store_->add_candidate(candidate("c1", "1"), {"gemm", "sm_90", "0"}, 1.0).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(store_
                ->add_candidate(candidate("c1"), {"gemm", "sm_90", "0"},
                                std::numeric_limits<double>::quiet_NaN())
                .code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(store_->add_candidate(candidate("c1"), {"ge:mm", "sm_90", "0"}, 1.0).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(store_->add_candidate(candidate("c 1"), {"gemm", "sm_90", "0"}, 1.0).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(run({"DBSIZE"}).integer, 0);
}

TEST_F(RedisStoreTest, AddCandidateReportsWrongTypeAtExec) {
  run({"SET", "kiln:pop:gemm:sm_90:0", "not a zset"});
  Status status = store_->add_candidate(candidate("c1"), {"gemm", "sm_90", "0"}, 1.0);
  EXPECT_EQ(status.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(status.message().find("WRONGTYPE"), std::string::npos) << status.message();
}

TEST_F(RedisStoreTest, PopulationBestIsAscendingByTime) {
  const std::vector<std::pair<std::string, double>> added = {
      {"c1", 30.0}, {"c2", 10.5}, {"c3", 50.0}, {"c4", 20.25}, {"c5", 10.0}};
  for (const auto& [id, time] : added) {
    ASSERT_TRUE(store_->add_candidate(candidate(id), {"gemm", "sm_90", "0"}, time).is_ok());
  }
  Result<std::vector<std::pair<std::string, double>>> best =
      store_->population_best("gemm", "sm_90", "0", 3);
  ASSERT_TRUE(best.is_ok()) << best.status().to_string();
  const std::vector<std::pair<std::string, double>> expected = {
      {"c5", 10.0}, {"c2", 10.5}, {"c4", 20.25}};
  EXPECT_EQ(*best, expected);
  EXPECT_EQ(store_->population_best("gemm", "sm_90", "0", 100)->size(), 5u);
  EXPECT_TRUE(store_->population_best("gemm", "sm_90", "1", 3)->empty());
  EXPECT_TRUE(store_->population_best("gemm", "sm_90", "0", 0)->empty());
}

TEST_F(RedisStoreTest, ExpiredLeasesAreFoundAndReleasedOnesGone) {
  ASSERT_TRUE(store_->lease_task("t1", "payload-1", 1000).is_ok());
  ASSERT_TRUE(store_->lease_task("t2", "payload-2", 2000).is_ok());
  ASSERT_TRUE(store_->lease_task("t3", "payload-3", 3000).is_ok());
  EXPECT_EQ(store_->lease_payload("t2").value(), "payload-2");
  EXPECT_EQ(store_->expired_leases(999).value(), std::vector<std::string>{});
  EXPECT_EQ(store_->expired_leases(2000).value(), (std::vector<std::string>{"t1", "t2"}));
  EXPECT_EQ(store_->expired_leases(5000, 1).value(), std::vector<std::string>{"t1"});

  ASSERT_TRUE(store_->release_lease("t1").is_ok());
  ASSERT_TRUE(store_->release_lease("t1").is_ok());  // releasing twice is harmless
  EXPECT_EQ(store_->lease_payload("t1").value(), std::nullopt);
  EXPECT_EQ(store_->expired_leases(5000).value(), (std::vector<std::string>{"t2", "t3"}));

  // Leasing again extends the deadline and replaces the payload.
  ASSERT_TRUE(store_->lease_task("t2", "payload-2b", 9000).is_ok());
  EXPECT_EQ(store_->expired_leases(5000).value(), std::vector<std::string>{"t3"});
  EXPECT_EQ(store_->lease_payload("t2").value(), "payload-2b");
  EXPECT_EQ(run({"ZCARD", "kiln:inflight"}).integer, 2);
  EXPECT_EQ(store_->lease_task("t:4", "p", 1).code(), StatusCode::kInvalidArgument);
}

TEST_F(RedisStoreTest, EventsAreReadInAppendOrder) {
  std::vector<std::string> ids;
  for (int i = 0; i < 5; ++i) {
    Result<std::string> id =
        store_->append_event("run1", {{"kind", "measured"}, {"n", std::to_string(i)}});
    ASSERT_TRUE(id.is_ok()) << id.status().to_string();
    ids.push_back(*id);
  }
  Result<std::vector<StreamEvent>> all = store_->read_events("run1", "", 100);
  ASSERT_TRUE(all.is_ok()) << all.status().to_string();
  ASSERT_EQ(all->size(), 5u);
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ((*all)[i].id, ids[i]);
    const std::vector<std::pair<std::string, std::string>> fields = {{"kind", "measured"},
                                                                     {"n", std::to_string(i)}};
    EXPECT_EQ((*all)[i].fields, fields);
  }
  Result<std::vector<StreamEvent>> page = store_->read_events("run1", ids[1], 2);
  ASSERT_TRUE(page.is_ok()) << page.status().to_string();
  ASSERT_EQ(page->size(), 2u);
  EXPECT_EQ((*page)[0].id, ids[2]);
  EXPECT_EQ((*page)[1].id, ids[3]);
  EXPECT_TRUE(store_->read_events("run1", ids[4], 10)->empty());
  EXPECT_TRUE(store_->read_events("run2", "", 10)->empty());
  EXPECT_EQ(store_->append_event("run1", {}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(store_->read_events("run1", "not-an-id", 10).status().code(),
            StatusCode::kInvalidArgument);
}

TEST_F(RedisStoreTest, TargetStatusesRoundTripSortedByName) {
  ASSERT_TRUE(store_->put_target_status("softmax", {{"state", "searching"}, {"best_us", "93.5"}}).is_ok());
  ASSERT_TRUE(store_->put_target_status("matmul", {{"state", "converged"}}).is_ok());
  ASSERT_TRUE(store_->put_target_status("softmax", {{"state", "converged"}}).is_ok());
  auto all = store_->target_statuses();
  ASSERT_TRUE(all.is_ok()) << all.status().to_string();
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ((*all)[0].first, "matmul");
  EXPECT_EQ((*all)[1].second.at("state"), "converged");  // replaced
  EXPECT_EQ((*all)[1].second.at("best_us"), "93.5");     // kept
  EXPECT_FALSE(store_->put_target_status("bad key", {{"a", "b"}}).is_ok());
  EXPECT_FALSE(store_->put_target_status("x", {}).is_ok());
}

TEST_F(RedisStoreTest, RunRecordFieldsAreReplacedByName) {
  auto none = store_->get_run();
  ASSERT_TRUE(none.is_ok()) << none.status().to_string();
  EXPECT_TRUE(none->empty());
  ASSERT_TRUE(store_->put_run({{"id", "run-1"}, {"state", "running"}}).is_ok());
  ASSERT_TRUE(store_->put_run({{"state", "finished"}, {"spent_s", "12.5"}}).is_ok());
  auto run = store_->get_run();
  ASSERT_TRUE(run.is_ok());
  EXPECT_EQ(*run, (std::map<std::string, std::string>{{"id", "run-1"}, {"state", "finished"}, {"spent_s", "12.5"}}));
  EXPECT_EQ(keys::run(), "kiln:run");
  EXPECT_FALSE(store_->put_run({}).is_ok());
}

TEST_F(RedisStoreTest, WriteStepChangesEveryKeyAndLogsTheEventTogether) {
  SearchStep step;
  step.event = {{"type", "result"}, {"task", "t1"}, {"result", std::string("\x00\xff bytes", 8)}};
  step.sources = {"__global__ void k() {}"};
  step.candidate = "c1";
  step.candidate_fields = {{"status", "kept"}, {"median_us", "12.5"}};
  step.target = "reduce";
  step.target_fields = {{"best_id", "c1"}};
  step.populations = {{{"reduce", "cpu", "0"}, {{"c1", 12.5}, {"c0", 20}}}, {{"reduce", "cpu", "1"}, {}}};
  step.run_fields = {{"state", "running"}};
  ASSERT_TRUE(run({"ZADD", "kiln:pop:reduce:cpu:1", "99", "gone"}).is_integer());
  Status written = store_->write_step("run-1", step);
  ASSERT_TRUE(written.is_ok()) << written.to_string();
  auto events = store_->read_events("run-1", "", 10);
  ASSERT_TRUE(events.is_ok());
  ASSERT_EQ(events->size(), 1u);
  EXPECT_EQ((*events)[0].fields, step.event);  // binary-safe
  EXPECT_EQ(*store_->get_source(sha256_hex(step.sources[0])), step.sources[0]);
  auto cand = store_->get_candidate("c1");
  ASSERT_TRUE(cand.is_ok() && cand->has_value());
  EXPECT_EQ((*cand)->status, "kept");
  auto best = store_->population_best("reduce", "cpu", "0", 10);
  ASSERT_TRUE(best.is_ok());
  EXPECT_EQ(*best, (std::vector<std::pair<std::string, double>>{{"c1", 12.5}, {"c0", 20}}));
  EXPECT_TRUE(store_->population_best("reduce", "cpu", "1", 10)->empty());  // replaced by none
  EXPECT_EQ(store_->target_statuses()->at(0).second.at("best_id"), "c1");
  EXPECT_EQ(store_->get_run()->at("state"), "running");

  // Bad input is refused before anything is sent.
  SearchStep bad = step;
  bad.candidate = "a:b";
  EXPECT_EQ(store_->write_step("run-1", bad).code(), StatusCode::kInvalidArgument);
  bad = step;
  bad.event.clear();
  EXPECT_EQ(store_->write_step("run-1", bad).code(), StatusCode::kInvalidArgument);
  bad = step;
  bad.populations[0].second[0].second = std::nan("");
  EXPECT_EQ(store_->write_step("run-1", bad).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(store_->read_events("run-1", "", 10)->size(), 1u);
}

TEST_F(RedisStoreTest, FindResultsReturnsEveryArchOfOneCandidate) {
  ASSERT_TRUE(store_->put_result_once("c1", "sm_90/H100", "r-h100").is_ok());
  ASSERT_TRUE(store_->put_result_once("c1", "cpu/x86", "r-cpu").is_ok());
  ASSERT_TRUE(store_->put_result_once("c10", "cpu/x86", "other").is_ok());
  auto found = store_->find_results("c1");
  ASSERT_TRUE(found.is_ok()) << found.status().to_string();
  EXPECT_EQ(*found, (std::vector<std::pair<std::string, std::string>>{{"cpu/x86", "r-cpu"}, {"sm_90/H100", "r-h100"}}));
  EXPECT_TRUE(store_->find_results("c2")->empty());
  EXPECT_FALSE(store_->find_results("c*").is_ok());
}

}  // namespace
}  // namespace kiln::redis
