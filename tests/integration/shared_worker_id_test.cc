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
#include <functional>
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

// A dispatcher with its Redis, and worker processes of the real binary against it.
class SharedWorkerId : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::copy_builtin_target("rmsnorm", dir_.file("targets"), [](nlohmann::json& spec) {
      spec["shapes"]["benchmark"] = {{"M", 64}, {"N", 256}};  // a quick evaluation
    });
    ASSERT_EQ(testing::connect_store(server_, &client_, &store_), "");
    coordinator::DispatcherOptions o;
    o.heartbeat.interval_ms = 200;
    o.heartbeat.liveness = 3;
    auto d = coordinator::Dispatcher::create(ctx_, *store_, o);
    ASSERT_TRUE(d.is_ok()) << d.status().to_string();
    dispatcher_ = std::move(d).value();
  }
  void TearDown() override {
    for (ChildProcess& c : children_) {
      if (c.running()) c.signal(SIGKILL);
    }
  }
  // Starts `kiln ROLE ... --worker-id gpu0`; its output goes to log(i).
  size_t start(const std::string& role = "evaluator") {
    SpawnOptions s;
    s.argv = {testing::kiln_binary(),
              "--log-level",
              "info",
              role,
              "--connect",
              dispatcher_->endpoint(),
              "--worker-id",
              "gpu0",
              "--heartbeat-ms",
              "200"};
    if (role == "evaluator") {
      const std::vector<std::string> more = {"--backend",     "cpu",
                                             "--targets-dir", dir_.file("targets"),
                                             "--cache-dir",   dir_.file("cache")};
      s.argv.insert(s.argv.end(), more.begin(), more.end());
    }
    s.output_file = log_path(children_.size());
    auto child = ChildProcess::spawn(s);
    EXPECT_TRUE(child.is_ok()) << child.status().to_string();
    children_.push_back(std::move(child).value());
    return children_.size() - 1;
  }
  std::string log_path(size_t i) const { return dir_.file("worker" + std::to_string(i) + ".log"); }
  std::string logs() const {
    std::string all;
    for (size_t i = 0; i < children_.size(); ++i)
      all += "--- worker " + std::to_string(i) + "\n" + read_file(log_path(i));
    return all;
  }
  // Polls the dispatcher for `seconds`, or until `done`.
  bool poll_for(
      double seconds, const std::function<bool()>& done = [] { return false; }) {
    const auto until = Clock::now() + std::chrono::milliseconds(static_cast<int>(seconds * 1000));
    while (Clock::now() < until) {
      auto r = dispatcher_->poll(20);
      EXPECT_TRUE(r.is_ok());
      if (r.is_ok()) merged_.insert(merged_.end(), r->begin(), r->end());
      if (done()) return true;
    }
    return false;
  }
  // A task for rmsnorm's seed; true when its verified result merged within a minute.
  bool evaluates() {
    proto::EvaluateTask task;
    task.task_id = "t-" + std::to_string(++tasks_);
    task.candidate_id = "cand-" + std::to_string(tasks_);
    task.target = "rmsnorm";
    task.backend = "cpu";
    task.source = read_file(dir_.file("targets/rmsnorm/seed_cpu.cpp"));
    task.kind = std::string(proto::kKindSeed);
    dispatcher_->submit(task);
    merged_.clear();
    if (!poll_for(60, [&] { return !merged_.empty(); })) return false;
    return merged_[0].outcome == proto::Outcome::kVerified;
  }

  testing::TempDir dir_;
  testing::RedisServer server_;
  std::optional<redis::RedisClient> client_;
  std::optional<redis::Store> store_;
  zmq::context_t ctx_;
  std::unique_ptr<coordinator::Dispatcher> dispatcher_;
  std::vector<ChildProcess> children_;
  std::vector<proto::EvaluationResult> merged_;
  int tasks_ = 0;
};

TEST_F(SharedWorkerId, TheCoordinatorStopsOneOfTwoProcessesWithOneIdAndTheOtherEvaluates) {
  start();
  start();
  // Until one of them ends (the coordinator refused it).
  int ended = -1;
  poll_for(40, [&] {
    for (int i = 0; i < 2; ++i)
      if (!children_[i].running()) ended = i;
    return ended >= 0;
  });
  ASSERT_GE(ended, 0) << "neither process was stopped; logs:\n" << logs();
  const int kept = 1 - ended;
  ExitStatus status = children_[ended].wait();
  EXPECT_EQ(status.exit_code, 1) << status.describe();
  const std::string log = read_file(log_path(ended));
  EXPECT_NE(log.find("worker id 'gpu0' is in use by another live process"), std::string::npos)
      << log;
  EXPECT_NE(log.find("give every worker its own --worker-id"), std::string::npos) << log;
  EXPECT_GE(dispatcher_->stats().refused_workers, 1u);

  // The other keeps the id: a task reaches it and its verified result merges.
  EXPECT_TRUE(evaluates()) << logs();
  EXPECT_TRUE(children_[kept].running());
  ASSERT_EQ(dispatcher_->worker_views().size(), 1u);
  EXPECT_EQ(dispatcher_->worker_views()[0].worker_id, "gpu0");
}

// The first process is stopped (SIGSTOP) while a second takes its id, and the second then leaves:
// the first, back, takes its id again and works. It is not refused for a process that is gone.
TEST_F(SharedWorkerId, AProcessWhoseSuccessorLeftTakesItsIdBack) {
  const size_t first = start();
  ASSERT_TRUE(poll_for(20, [&] { return dispatcher_->worker_views().size() == 1; })) << logs();
  children_[first].signal(SIGSTOP);
  const size_t second = start();
  poll_for(3);
  children_[second].signal(SIGINT);  // it says bye and leaves
  ASSERT_TRUE(poll_for(20, [&] { return !children_[second].running(); })) << logs();
  children_[first].signal(SIGCONT);
  EXPECT_TRUE(evaluates()) << logs();
  poll_for(1);
  EXPECT_TRUE(children_[first].running()) << logs();
  EXPECT_EQ(read_file(log_path(first)).find("in use by another"), std::string::npos) << logs();
}

// An agent started with an evaluator's id is no restart of it: the agent is refused, and the
// evaluator keeps its id and works.
TEST_F(SharedWorkerId, AnAgentWithAnEvaluatorsIdIsRefusedAndTheEvaluatorGoesOn) {
  const size_t evaluator = start();
  ASSERT_TRUE(poll_for(20, [&] { return dispatcher_->worker_views().size() == 1; })) << logs();
  const size_t agent = start("agent");
  ASSERT_TRUE(poll_for(30, [&] { return !children_[agent].running(); })) << logs();
  EXPECT_EQ(children_[agent].wait().exit_code, 1);
  EXPECT_NE(read_file(log_path(agent)).find("is in use by another live process (an evaluator"),
            std::string::npos)
      << logs();
  EXPECT_TRUE(evaluates()) << logs();
  EXPECT_TRUE(children_[evaluator].running());
}

}  // namespace
}  // namespace kiln
