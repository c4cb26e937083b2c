// The evaluator daemon as a real process (`kiln evaluator --backend cpu`) against a test ROUTER
// standing in for the coordinator: hello and credits, an evaluation round trip, bad input,
// heartbeats, and reconnection after the coordinator restarts.
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "shared/protocol.h"
#include "shared/transport.h"
#include "tests/support/test_env.h"

extern char** environ;

namespace kiln {
namespace {

using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

class EvaluatorDaemon : public ::testing::Test {
 protected:
  void SetUp() override {
    // A copy of rmsnorm with a small benchmark shape, so a cpu evaluation takes a moment.
    fs::create_directories(dir_.file("targets"));
    fs::copy(std::string(KILN_SOURCE_DIR) + "/targets/rmsnorm", dir_.file("targets/rmsnorm"),
             fs::copy_options::recursive);
    std::ifstream in(dir_.file("targets/rmsnorm/target.json"));
    nlohmann::json spec = nlohmann::json::parse(in);
    spec["shapes"]["benchmark"] = {{"M", 64}, {"N", 256}};
    std::ofstream(dir_.file("targets/rmsnorm/target.json")) << spec.dump(2);
    std::ifstream seed(dir_.file("targets/rmsnorm/seed_cpu.cpp"));
    seed_source_.assign(std::istreambuf_iterator<char>(seed), {});

    Result<net::RouterSocket> router = net::RouterSocket::bind(context_, "tcp://127.0.0.1:*", {});
    ASSERT_TRUE(router.is_ok()) << router.status().to_string();
    router_ = std::make_unique<net::RouterSocket>(std::move(router).value());
    endpoint_ = router_->last_endpoint();
    start_daemon();
  }

  void TearDown() override {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }

  void start_daemon() {
    std::vector<std::string> args = {testing::kiln_binary(), "--log-level", "warn", "evaluator",
                                     "--connect", endpoint_, "--backend", "cpu",
                                     "--targets-dir", dir_.file("targets"),
                                     "--cache-dir", dir_.file("cache"), "--heartbeat-ms", "200",
                                     "--worker-id", "test-evaluator"};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    ASSERT_EQ(posix_spawn(&pid_, argv[0], nullptr, nullptr, argv.data(), environ), 0);
  }

  // The next message of `type` from the daemon within `timeout_ms`, skipping others.
  std::optional<proto::Envelope> next(std::string_view type, int timeout_ms = 20000) {
    auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
    while (Clock::now() < deadline) {
      Result<std::optional<net::RoutedMessage>> got = router_->receive(100);
      if (!got.is_ok() || !got->has_value()) continue;
      peer_ = (*got)->peer;
      Result<proto::Envelope> env = proto::decode((*got)->payload);
      EXPECT_TRUE(env.is_ok()) << env.status().to_string();
      if (env.is_ok() && proto::type_name(env->body) == type) return *env;
    }
    return std::nullopt;
  }

  void send(proto::Message body) {
    ASSERT_TRUE(router_->send(peer_, proto::encode({proto::kProtocolVersion, ids_.next(), std::move(body)})).is_ok());
  }

  proto::EvaluateTask task(const std::string& id, const std::string& target) {
    proto::EvaluateTask t;
    t.task_id = id;
    t.candidate_id = "cand-" + id;
    t.target = target;
    t.backend = "cpu";
    t.source = seed_source_;
    return t;
  }

  testing::TempDir dir_;
  zmq::context_t context_{1};
  std::unique_ptr<net::RouterSocket> router_;
  std::string endpoint_, peer_, seed_source_;
  proto::IdGenerator ids_{"test-coordinator"};
  pid_t pid_ = -1;
};

TEST_F(EvaluatorDaemon, AnnouncesItselfAndReturnsAVerifiedTimedResult) {
  std::optional<proto::Envelope> hello = next("hello");
  ASSERT_TRUE(hello.has_value());
  const auto& h = std::get<proto::Hello>(hello->body);
  EXPECT_EQ(h.role, "evaluator");
  EXPECT_EQ(h.worker_id, "test-evaluator");
  EXPECT_EQ(h.backends, std::vector<std::string>{"cpu"});
  std::optional<proto::Envelope> credit = next("credit");
  ASSERT_TRUE(credit.has_value());
  EXPECT_EQ(std::get<proto::Credit>(credit->body).count, 2u);

  send(task("t1", "rmsnorm"));
  std::optional<proto::Envelope> result = next("result", 60000);
  ASSERT_TRUE(result.has_value());
  const auto& r = std::get<proto::EvaluationResult>(result->body);
  EXPECT_EQ(r.task_id, "t1");
  EXPECT_EQ(r.candidate_id, "cand-t1");
  EXPECT_EQ(r.outcome, proto::Outcome::kVerified) << r.log;
  EXPECT_GT(r.timing.median_us, 0);
  EXPECT_GE(r.stages.size(), 7u);
  std::optional<proto::Envelope> more = next("credit");
  ASSERT_TRUE(more.has_value());  // the slot is offered again
  EXPECT_EQ(std::get<proto::Credit>(more->body).count, 1u);
}

TEST_F(EvaluatorDaemon, EvaluatesTwoQueuedTasksWhoseCompilesOverlap) {
  ASSERT_TRUE(next("hello").has_value());
  // The second task waits behind the first; its compiles start on the pool meanwhile.
  proto::EvaluateTask second = task("t4", "rmsnorm");
  second.source += "\n// a different text, so a different compile\n";
  send(task("t3", "rmsnorm"));
  send(second);
  std::set<std::string> answered;
  for (int i = 0; i < 2; ++i) {
    std::optional<proto::Envelope> result = next("result", 60000);
    ASSERT_TRUE(result.has_value());
    const auto& r = std::get<proto::EvaluationResult>(result->body);
    EXPECT_EQ(r.outcome, proto::Outcome::kVerified) << r.log;
    answered.insert(r.task_id);
  }
  EXPECT_EQ(answered, (std::set<std::string>{"t3", "t4"}));
}

TEST_F(EvaluatorDaemon, AnswersGarbageWithAnErrorAndKeepsWorking) {
  ASSERT_TRUE(next("hello").has_value());
  ASSERT_TRUE(router_->send(peer_, std::string("\xc1 not msgpack", 13)).is_ok());
  std::optional<proto::Envelope> err = next("error");
  ASSERT_TRUE(err.has_value());
  EXPECT_EQ(std::get<proto::Error>(err->body).code, proto::kErrorBadMessage);

  send(task("t2", "no_such_target"));
  std::optional<proto::Envelope> result = next("result");
  ASSERT_TRUE(result.has_value());
  const auto& r = std::get<proto::EvaluationResult>(result->body);
  EXPECT_EQ(r.outcome, proto::Outcome::kInternalError);
  EXPECT_NE(r.log.find("no_such_target"), std::string::npos) << r.log;
  EXPECT_EQ(waitpid(pid_, nullptr, WNOHANG), 0) << "the daemon exited";
}

TEST_F(EvaluatorDaemon, SendsHeartbeatsWhileIdle) {
  ASSERT_TRUE(next("hello").has_value());
  EXPECT_TRUE(next("heartbeat", 3000).has_value());
}

TEST_F(EvaluatorDaemon, ReannouncesItselfAfterTheCoordinatorRestarts) {
  ASSERT_TRUE(next("hello").has_value());
  router_.reset();  // the coordinator goes away without a word
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  // A new coordinator on the same endpoint; libzmq may hold the port a moment after close.
  for (int i = 0; i < 50 && !router_; ++i) {
    Result<net::RouterSocket> r = net::RouterSocket::bind(context_, endpoint_, {});
    if (r.is_ok()) router_ = std::make_unique<net::RouterSocket>(std::move(r).value());
    else std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_TRUE(router_);
  // Silent for liveness x interval (600 ms), then a reconnect after a back-off of ~1 s.
  std::optional<proto::Envelope> hello = next("hello", 10000);
  ASSERT_TRUE(hello.has_value());
  EXPECT_EQ(std::get<proto::Hello>(hello->body).worker_id, "test-evaluator");
}

}  // namespace
}  // namespace kiln
