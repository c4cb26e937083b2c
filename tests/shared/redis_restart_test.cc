// A Redis that goes away for seconds and comes back from its AOF: with reconnect_for_ms the
// client waits for it instead of failing, and a search step written across the restart lands
// exactly once (real redis-server, killed with SIGKILL and started again on the same socket).
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "shared/local_redis.h"
#include "shared/redis_client.h"
#include "shared/redis_store.h"
#include "tests/support/test_env.h"

namespace kiln::redis {
namespace {

using Clock = std::chrono::steady_clock;

SearchStep step(int n) {
  SearchStep s;
  s.event = {{"type", "submit"}, {"seq", std::to_string(n)}};
  s.candidate = "cand-" + std::to_string(n);
  s.candidate_fields = {{"status", "submitted"}};
  return s;
}

TEST(RedisRestart, WritesWaitForARestartedRedisAndLandOnce) {
  testing::TempDir dir;
  LocalRedisOptions lo;
  lo.dir = dir.file("redis");
  lo.persist = true;
  auto server = LocalRedis::start(lo);
  ASSERT_TRUE(server.is_ok()) << server.status().to_string();
  RedisOptions ro;
  ro.url = (*server)->url();
  ro.reconnect_for_ms = 20000;
  auto client = RedisClient::connect(ro);
  ASSERT_TRUE(client.is_ok()) << client.status().to_string();
  Store store(*client);
  ASSERT_TRUE(store.init_schema().is_ok());
  ASSERT_TRUE(store.write_step("r1", step(1)).is_ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // the AOF is fsynced every second

  (*server)->kill_now();
  std::unique_ptr<LocalRedis> again;
  std::thread restarter([&] {
    std::this_thread::sleep_for(std::chrono::seconds(3));
    auto r = LocalRedis::start(lo);
    EXPECT_TRUE(r.is_ok()) << r.status().to_string();
    if (r.is_ok()) again = std::move(r).value();
  });
  const auto start = Clock::now();
  Status written = store.write_step("r1", step(2));
  const double waited = std::chrono::duration<double>(Clock::now() - start).count();
  restarter.join();
  ASSERT_TRUE(written.is_ok()) << written.to_string();
  EXPECT_GE(waited, 2.0) << "it wrote while Redis was down?";
  Result<std::vector<StreamEvent>> events = store.read_events("r1", "", 100);
  ASSERT_TRUE(events.is_ok()) << events.status().to_string();
  ASSERT_EQ(events->size(), 2u);
  EXPECT_EQ(events->at(0).fields.at(1).second, "1");
  EXPECT_EQ(events->at(1).fields.at(1).second, "2");
  // A lease write (a script) and a result are retried too.
  ASSERT_TRUE(store.lease_task("task-1", "payload", 4102444800000).is_ok());
  ASSERT_TRUE(store.put_result_once("cand-2", "cpu", "bytes").is_ok());
}

TEST(RedisRestart, WithoutRetryTimeALostRedisIsAnErrorSoon) {
  testing::TempDir dir;
  LocalRedisOptions lo;
  lo.dir = dir.file("redis");
  auto server = LocalRedis::start(lo);
  ASSERT_TRUE(server.is_ok());
  RedisOptions ro;
  ro.url = (*server)->url();
  ro.max_reconnect_attempts = 2;
  auto client = RedisClient::connect(ro);
  ASSERT_TRUE(client.is_ok());
  Store store(*client);
  (*server)->kill_now();
  const auto start = Clock::now();
  Status written = store.write_step("r1", step(1));
  EXPECT_FALSE(written.is_ok());
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - start).count(), 5.0);
}

}  // namespace
}  // namespace kiln::redis
