// The evaluator daemon as a real process (`kiln evaluator --backend cpu`) against a test ROUTER
// standing in for the coordinator: hello and credits, an evaluation round trip, bad input,
// heartbeats, reconnection after the coordinator restarts, what its hello says (arch, spec
// hashes), a task for another copy of a target, the kind a task names, a task sent again while
// held, and the coordinator's bye and refusal.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "shared/child_process.h"
#include "shared/protocol.h"
#include "shared/target_path.h"
#include "shared/target_spec.h"
#include "shared/transport.h"
#include "tests/support/test_env.h"

namespace kiln {
namespace {

using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

class EvaluatorDaemon : public ::testing::Test {
 protected:
  void SetUp() override {
    // A copy of rmsnorm with a small benchmark shape, so a cpu evaluation takes a moment.
    testing::copy_builtin_target("rmsnorm", dir_.file("targets"), [](nlohmann::json& spec) {
      spec["shapes"]["benchmark"] = {{"M", 64}, {"N", 256}};
    });
    std::ifstream seed(dir_.file("targets/rmsnorm/seed_cpu.cpp"));
    seed_source_.assign(std::istreambuf_iterator<char>(seed), {});

    Result<net::RouterSocket> router = net::RouterSocket::bind(context_, "tcp://127.0.0.1:*", {});
    ASSERT_TRUE(router.is_ok()) << router.status().to_string();
    router_ = std::make_unique<net::RouterSocket>(std::move(router).value());
    endpoint_ = router_->last_endpoint();
    start_daemon();
  }

  void TearDown() override {
    if (daemon_) daemon_->signal(SIGKILL);
  }

  void start_daemon() {
    std::vector<std::string> args = {testing::kiln_binary(), "--log-level", "warn", "evaluator",
                                     "--connect", endpoint_, "--backend", "cpu",
                                     "--targets-dir", dir_.file("targets"),
                                     "--cache-dir", dir_.file("cache"), "--heartbeat-ms", "200",
                                     "--worker-id", "test-evaluator"};
    args.insert(args.end(), extra_args_.begin(), extra_args_.end());
    SpawnOptions o;
    o.argv = args;
    Result<ChildProcess> child = ChildProcess::spawn(o);
    ASSERT_TRUE(child.is_ok()) << child.status().to_string();
    daemon_.emplace(std::move(child).value());
  }

  // Whether the daemon ends within `timeout_ms`.
  bool ends_within(int timeout_ms) {
    const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
    while (Clock::now() < deadline) {
      if (!daemon_->running()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }

  // Every message from the daemon until `until` holds for one, or `timeout_ms` passes. Its
  // heartbeats are answered, as a coordinator does: a daemon that hears nothing reconnects under
  // a new identity, and a task sent to the old one would be lost (unless `answer_heartbeats` is
  // false, to test that).
  std::vector<proto::Envelope> collect(int timeout_ms,
                                       const std::function<bool(const proto::Envelope&)>& until) {
    std::vector<proto::Envelope> got;
    const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
    while (Clock::now() < deadline) {
      Result<std::optional<net::RoutedMessage>> m = router_->receive(100);
      if (!m.is_ok() || !m->has_value()) continue;
      peer_ = (*m)->peer;
      Result<proto::Envelope> env = proto::decode((*m)->payload);
      EXPECT_TRUE(env.is_ok()) << env.status().to_string();
      if (!env.is_ok()) continue;
      got.push_back(*env);
      if (until(got.back())) break;
      if (answer_heartbeats_ && std::holds_alternative<proto::Heartbeat>(env->body))
        send(proto::Heartbeat{});
    }
    return got;
  }

  // The next message of `type` within `timeout_ms`; the others are passed over.
  std::optional<proto::Envelope> next(std::string_view type, int timeout_ms = 20000) {
    auto is_type = [&](const proto::Envelope& e) { return proto::type_name(e.body) == type; };
    std::vector<proto::Envelope> got = collect(timeout_ms, is_type);
    if (got.empty() || !is_type(got.back())) return std::nullopt;
    return got.back();
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
    t.kind = std::string(proto::kKindSeed);
    return t;
  }

  testing::TempDir dir_;
  zmq::context_t context_{1};
  std::unique_ptr<net::RouterSocket> router_;
  std::string endpoint_, peer_, seed_source_;
  proto::IdGenerator ids_{"test-coordinator"};
  std::optional<ChildProcess> daemon_;
  bool answer_heartbeats_ = true;
  std::vector<std::string> extra_args_;
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
  EXPECT_EQ(std::get<proto::Credit>(credit->body).count, 3u);

  send(task("t1", "rmsnorm"));
  std::optional<proto::Envelope> result = next("result", 60000);
  ASSERT_TRUE(result.has_value());
  const auto& r = std::get<proto::EvaluationResult>(result->body);
  EXPECT_EQ(r.task_id, "t1");
  EXPECT_EQ(r.candidate_id, "cand-t1");
  EXPECT_EQ(r.outcome, proto::Outcome::kVerified) << r.log;
  EXPECT_GT(r.timing.median_us, 0);
  EXPECT_EQ(proto::result_inconsistency(r), "")
      << "the coordinator would refuse the evaluator's own result";
  std::optional<proto::Envelope> more = next("credit");
  ASSERT_TRUE(more.has_value());  // the slot is offered again
  EXPECT_EQ(std::get<proto::Credit>(more->body).count, 1u);
}

TEST_F(EvaluatorDaemon, EvaluatesTwoQueuedTasksWhoseCompilesOverlap) {
  ASSERT_TRUE(next("hello").has_value());
  // A first task creates the target's evaluator; then the second task waits behind the third and
  // its compile runs on the pool meanwhile, so it is served from the compile cache when it runs.
  send(task("t2", "rmsnorm"));
  std::optional<proto::Envelope> first = next("result", 60000);
  ASSERT_TRUE(first.has_value());
  EXPECT_GT(std::get<proto::EvaluationResult>(first->body).metrics.at("compile_ms"), 0);
  EXPECT_GT(std::get<proto::EvaluationResult>(first->body).metrics.at("compiles_run"), 0);
  proto::EvaluateTask second = task("t4", "rmsnorm");
  second.source += "\n// a different text, so a different compile\n";
  proto::EvaluateTask before = task("t3", "rmsnorm");
  before.source += "\n// another text\n";
  send(before);
  send(second);
  std::map<std::string, proto::EvaluationResult> answered;
  for (int i = 0; i < 2; ++i) {
    std::optional<proto::Envelope> result = next("result", 60000);
    ASSERT_TRUE(result.has_value());
    const auto& r = std::get<proto::EvaluationResult>(result->body);
    EXPECT_EQ(r.outcome, proto::Outcome::kVerified) << r.log;
    answered[r.task_id] = r;
  }
  ASSERT_EQ(answered.size(), 2u);
  ASSERT_EQ(answered.count("t4"), 1u);
  // Started ahead of it: served from the cache, or waited for if still under way (how long it
  // waited depends on the machine's load, so compile_ms may be above 0).
  EXPECT_EQ(answered["t4"].metrics.at("compiles_run"), 0) << "t4's compile did not run ahead of it";
}

// A task sent again while the daemon holds it (the coordinator's route to the worker id moved
// away and back) is evaluated and answered once; the slot the copy took is offered back at once.
TEST_F(EvaluatorDaemon, ATaskSentAgainWhileHeldIsAnsweredOnce) {
  ASSERT_TRUE(next("hello").has_value());
  ASSERT_TRUE(next("credit").has_value());  // the first offer: its capacity
  send(task("t7", "rmsnorm"));
  send(task("t7", "rmsnorm"));
  auto is_result = [](const proto::Envelope& e) {
    return std::holds_alternative<proto::EvaluationResult>(e.body);
  };
  std::vector<proto::Envelope> got = collect(60000, is_result);
  ASSERT_FALSE(got.empty());
  ASSERT_TRUE(is_result(got.back())) << "no result";
  const auto& r = std::get<proto::EvaluationResult>(got.back().body);
  EXPECT_EQ(r.task_id, "t7");
  EXPECT_EQ(r.outcome, proto::Outcome::kVerified) << r.log;
  // Before the answer (heartbeats aside), the copy's slot came back.
  std::erase_if(got, [](const proto::Envelope& e) {
    return std::holds_alternative<proto::Heartbeat>(e.body);
  });
  ASSERT_EQ(got.size(), 2u);
  ASSERT_TRUE(std::holds_alternative<proto::Credit>(got[0].body));
  EXPECT_EQ(std::get<proto::Credit>(got[0].body).count, 1u);
  // A second evaluation would answer within its wall time again (with margin); none comes, only
  // the answered task's slot.
  const int wait_ms = 5000 + 3 * static_cast<int>(r.wall_ms);
  std::vector<proto::Envelope> after = collect(wait_ms, is_result);
  int results = 0, credits = 0;
  for (const auto& e : after) {
    results += is_result(e);
    credits += std::holds_alternative<proto::Credit>(e.body);
  }
  EXPECT_EQ(results, 0) << "t7 was evaluated twice";
  EXPECT_EQ(credits, 1);
  // Once answered, the id may come again (a retry the coordinator decided on): evaluated anew.
  send(task("t7", "rmsnorm"));
  std::optional<proto::Envelope> again = next("result", 60000);
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(std::get<proto::EvaluationResult>(again->body).task_id, "t7");
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
  EXPECT_TRUE(r.worker_fault) << "a target the evaluator cannot load is not the candidate's fault";
  EXPECT_TRUE(daemon_->running()) << "the daemon exited";
}

TEST_F(EvaluatorDaemon, SendsHeartbeatsWhileIdle) {
  ASSERT_TRUE(next("hello").has_value());
  EXPECT_TRUE(next("heartbeat", 3000).has_value());
}

TEST_F(EvaluatorDaemon, ReannouncesItselfAfterTheCoordinatorRestarts) {
  answer_heartbeats_ = false;
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

TEST_F(EvaluatorDaemon, TheHelloNamesArchAndTheSpecHashOfEveryTarget) {
  std::optional<proto::Envelope> hello = next("hello");
  ASSERT_TRUE(hello.has_value());
  const auto& h = std::get<proto::Hello>(hello->body);
  EXPECT_EQ(h.gpu_model, "") << "a cpu evaluator names no GPU model";
  EXPECT_FALSE(h.arch.empty());
  // Every target on its lookup path: its own folder's rmsnorm, then the built-in ones.
  Result<TargetSpec> t = load_target(dir_.file("targets/rmsnorm"));
  ASSERT_TRUE(t.is_ok());
  EXPECT_EQ(h.spec_hashes.at("rmsnorm"), t->spec_hash);
  Result<std::vector<TargetSpec>> all = load_target_path(dir_.file("targets"), /*own_only=*/false);
  ASSERT_TRUE(all.is_ok()) << all.status().message();
  std::map<std::string, std::string> expected;
  for (const TargetSpec& s : *all) expected[s.name] = s.spec_hash;
  EXPECT_GT(expected.size(), 1u);
  EXPECT_EQ(h.spec_hashes, expected);
}

// `--gpu-model` names the model the hello announces (the coordinator's populations follow it); a
// name with control characters is refused before anything connects.
TEST_F(EvaluatorDaemon, AnnouncesTheGpuModelItIsToldAndRefusesAnUnprintableOne) {
  ASSERT_TRUE(next("hello").has_value());
  daemon_->signal(SIGKILL);
  extra_args_ = {"--gpu-model", "Xeon 8480 rack 3"};
  start_daemon();
  std::optional<proto::Envelope> hello = next("hello");
  ASSERT_TRUE(hello.has_value());
  EXPECT_EQ(std::get<proto::Hello>(hello->body).gpu_model, "Xeon 8480 rack 3");

  daemon_->signal(SIGKILL);
  extra_args_ = {"--gpu-model", "two\nlines"};
  start_daemon();
  ASSERT_TRUE(ends_within(10000));
  EXPECT_FALSE(daemon_->exit_status()->ok());
}

// A task for another copy of the target (its spec hash differs) is not judged here: the result is
// a worker fault that says what to do, and the daemon goes on.
TEST_F(EvaluatorDaemon, ATaskForAnotherCopyOfTheTargetIsAWorkerFault) {
  ASSERT_TRUE(next("hello").has_value());
  proto::EvaluateTask t = task("t5", "rmsnorm");
  t.spec_hash = "0123456789abcdef";
  send(t);
  std::optional<proto::Envelope> result = next("result");
  ASSERT_TRUE(result.has_value());
  const auto& r = std::get<proto::EvaluationResult>(result->body);
  EXPECT_TRUE(r.worker_fault);
  EXPECT_TRUE(r.stages.empty());
  EXPECT_NE(r.log.find("--targets-dir"), std::string::npos) << r.log;
  EXPECT_TRUE(daemon_->running());
}

// The kind comes from the task: the template's source with its parameters is judged with the
// template's geometry; the same task without a kind is not guessed at.
TEST_F(EvaluatorDaemon, TheTaskSaysWhetherItIsTheSeedOrTheTemplate) {
  ASSERT_TRUE(next("hello").has_value());
  Result<TargetSpec> spec = load_target(dir_.file("targets/rmsnorm"));
  ASSERT_TRUE(spec.is_ok());
  const KernelSpec& tmpl = *spec->backend("cpu")->tunable;
  std::ifstream in(dir_.file("targets/rmsnorm/template_cpu.cpp"));
  proto::EvaluateTask t = task("t6", "rmsnorm");
  t.source.assign(std::istreambuf_iterator<char>(in), {});
  t.kind = std::string(proto::kKindTemplate);
  for (const auto& [name, values] : tmpl.space) t.params[name] = std::to_string(values.front());
  send(t);
  std::optional<proto::Envelope> result = next("result", 60000);
  ASSERT_TRUE(result.has_value());
  EXPECT_EQ(std::get<proto::EvaluationResult>(result->body).outcome, proto::Outcome::kVerified)
      << std::get<proto::EvaluationResult>(result->body).log;
  t.task_id = "t7";
  t.kind.clear();
  send(t);
  result = next("result", 60000);
  ASSERT_TRUE(result.has_value());
  EXPECT_TRUE(std::get<proto::EvaluationResult>(result->body).worker_fault);
}

// A coordinator that stops short of the end of the run: the evaluator waits for it and announces
// itself again; the end of the run: it exits 0; a refusal: it exits with an error.
TEST_F(EvaluatorDaemon, ActsOnTheCoordinatorsByeAndRefusal) {
  ASSERT_TRUE(next("hello").has_value());
  send(proto::Bye{"the coordinator was stopped", std::string(proto::kByeStopping)});
  EXPECT_TRUE(next("hello", 10000).has_value()) << "no hello again after a stopping bye";
  EXPECT_TRUE(daemon_->running());
  send(proto::Bye{"run finished", std::string(proto::kByeFinished)});
  ASSERT_TRUE(ends_within(10000));
  EXPECT_TRUE(daemon_->exit_status()->ok()) << daemon_->exit_status()->describe();

  start_daemon();
  ASSERT_TRUE(next("hello").has_value());
  send(proto::Error{std::string(proto::kErrorRefused), "its target 'rmsnorm' differs", ""});
  ASSERT_TRUE(ends_within(10000));
  EXPECT_FALSE(daemon_->exit_status()->ok());
}

}  // namespace
}  // namespace kiln
