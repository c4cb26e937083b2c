// Two real evaluator processes started with the same --worker-id against a real dispatcher (real
// Redis, real ZeroMQ). Their sockets carry the id as their identity, so they take the routing id
// from each other and each announces itself again. The coordinator tells them apart by their
// hellos' sessions and refuses the one that announced itself first, with an error that names the
// option to fix; the other keeps its place and evaluates.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "coordinator/dispatcher.h"
#include "shared/child_process.h"
#include "shared/redis_client.h"
#include "tests/support/test_env.h"

namespace kiln {
namespace {

using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(SharedWorkerId, TheCoordinatorStopsOneOfTwoProcessesWithOneIdAndTheOtherEvaluates) {
  testing::TempDir dir;
  fs::create_directories(dir.file("targets"));
  fs::copy(testing::builtin_targets_dir() + "/rmsnorm", dir.file("targets/rmsnorm"),
           fs::copy_options::recursive);
  nlohmann::json spec =
      nlohmann::json::parse(std::ifstream(dir.file("targets/rmsnorm/target.json")));
  spec["shapes"]["benchmark"] = {{"M", 64}, {"N", 256}};  // a quick evaluation
  std::ofstream(dir.file("targets/rmsnorm/target.json")) << spec.dump(2);

  testing::RedisServer server;
  std::optional<redis::RedisClient> client;
  std::optional<redis::Store> store;
  ASSERT_EQ(testing::connect_store(server, &client, &store), "");
  zmq::context_t ctx;
  coordinator::DispatcherOptions o;
  o.heartbeat.interval_ms = 200;
  o.heartbeat.liveness = 3;
  auto dispatcher = coordinator::Dispatcher::create(ctx, *store, o);
  ASSERT_TRUE(dispatcher.is_ok()) << dispatcher.status().to_string();
  auto& d = **dispatcher;

  std::vector<ChildProcess> children;
  for (int i = 0; i < 2; ++i) {
    SpawnOptions s;
    s.argv = {testing::kiln_binary(),
              "--log-level",
              "info",
              "evaluator",
              "--connect",
              d.endpoint(),
              "--backend",
              "cpu",
              "--targets-dir",
              dir.file("targets"),
              "--cache-dir",
              dir.file("cache"),
              "--heartbeat-ms",
              "200",
              "--worker-id",
              "gpu0"};
    s.output_file = dir.file("evaluator" + std::to_string(i) + ".log");
    auto child = ChildProcess::spawn(s);
    ASSERT_TRUE(child.is_ok()) << child.status().to_string();
    children.push_back(std::move(child).value());
  }

  // Until one of them ends (the coordinator refused it).
  int ended = -1;
  const auto give_up = Clock::now() + std::chrono::seconds(40);
  while (ended < 0 && Clock::now() < give_up) {
    ASSERT_TRUE(d.poll(20).is_ok());
    for (int i = 0; i < 2; ++i)
      if (!children[i].running()) ended = i;
  }
  ASSERT_GE(ended, 0) << "neither process was stopped; logs:\n"
                      << read_file(dir.file("evaluator0.log"))
                      << read_file(dir.file("evaluator1.log"));
  const int kept = 1 - ended;
  ExitStatus status = children[ended].wait();
  EXPECT_EQ(status.exit_code, 1) << status.describe();
  const std::string log = read_file(dir.file("evaluator" + std::to_string(ended) + ".log"));
  EXPECT_NE(log.find("worker id 'gpu0' is in use by another live process"), std::string::npos)
      << log;
  EXPECT_NE(log.find("give every worker its own --worker-id"), std::string::npos) << log;
  EXPECT_GE(d.stats().refused_workers, 1u);

  // The other keeps the id: a task reaches it and its verified result merges.
  proto::EvaluateTask task;
  task.task_id = "t-1";
  task.candidate_id = "cand-1";
  task.target = "rmsnorm";
  task.backend = "cpu";
  task.source = read_file(dir.file("targets/rmsnorm/seed_cpu.cpp"));
  task.kind = std::string(proto::kKindSeed);
  d.submit(task);
  std::vector<proto::EvaluationResult> merged;
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  while (merged.empty() && Clock::now() < deadline) {
    auto r = d.poll(20);
    ASSERT_TRUE(r.is_ok());
    merged.insert(merged.end(), r->begin(), r->end());
  }
  ASSERT_EQ(merged.size(), 1u) << read_file(dir.file("evaluator" + std::to_string(kept) + ".log"));
  EXPECT_EQ(merged[0].outcome, proto::Outcome::kVerified) << merged[0].log;
  EXPECT_TRUE(children[kept].running());
  ASSERT_EQ(d.worker_views().size(), 1u);
  EXPECT_EQ(d.worker_views()[0].worker_id, "gpu0");
  children[kept].signal(SIGKILL);
}

}  // namespace
}  // namespace kiln
