// WorkerLink, the worker side of the coordinator protocol, against a real ROUTER on loopback TCP
// playing the coordinator: work comes back to the daemon, heartbeats and errors do not, garbage
// and messages the role does not take are answered with errors, a coordinator that falls
// silent makes the link reconnect under the same identity and announce itself again, and a task
// sent again while held is handed to the daemon once.
#include "shared/worker_link.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <string>

namespace kiln::net {
namespace {

constexpr int kLinkWaitMs = 2000;

class WorkerLinkTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto r = RouterSocket::bind(ctx_, "tcp://127.0.0.1:*", SocketOptions{});
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    router_.emplace(std::move(r).value());
  }
  // The next message the "coordinator" gets, decoded; fails the test when none comes.
  proto::Envelope next(std::string* peer = nullptr) {
    auto got = router_->receive(kLinkWaitMs);
    EXPECT_TRUE(got.is_ok() && got->has_value()) << "nothing reached the coordinator";
    if (!got.is_ok() || !got->has_value()) return {};
    if (peer) *peer = (*got)->peer;
    auto env = proto::decode((*got)->payload);
    EXPECT_TRUE(env.is_ok()) << env.status().to_string();
    return env.is_ok() ? std::move(env).value() : proto::Envelope{};
  }
  void to_worker(const std::string& peer, proto::Message body) {
    ASSERT_TRUE(router_->send(peer, proto::encode({proto::kProtocolVersion, "c-1", std::move(body)})).is_ok());
  }
  // Receives on `link` until something comes back or `tries` waits of 100 ms pass.
  static std::optional<proto::Envelope> pump(WorkerLink& link, int tries = 10) {
    for (int i = 0; i < tries; ++i) {
      auto got = link.receive(100);
      EXPECT_TRUE(got.is_ok());
      if (got.is_ok() && got->has_value()) return std::move(**got);
    }
    return std::nullopt;
  }

  // Runs `link` against a coordinator that answers nothing, handing each message that reaches the
  // coordinator to `seen` until it returns true (true) or 3 s pass (false).
  bool until_silent_coordinator_sees(
      WorkerLink& link, const std::function<void()>& announce,
      const std::function<bool(const RoutedMessage&, const proto::Envelope&)>& seen) {
    std::atomic<bool> stop{false};
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(3);
    while (std::chrono::steady_clock::now() < deadline) {
      EXPECT_TRUE(link.receive(10).is_ok());
      link.keep_alive(stop, announce);
      auto got = router_->receive(0);
      EXPECT_TRUE(got.is_ok());
      if (!got.is_ok() || !got->has_value()) continue;
      auto env = proto::decode((*got)->payload);
      EXPECT_TRUE(env.is_ok());
      if (env.is_ok() && seen(**got, *env)) return true;
    }
    return false;
  }

  // Heartbeats every 20 ms, silence past 3 of them, reconnects from 50 ms: fast enough for tests.
  static HeartbeatPolicy fast_heartbeat() {
    HeartbeatPolicy fast;
    fast.interval_ms = 20;
    fast.liveness = 3;
    fast.reconnect_initial_ms = 50;
    return fast;
  }

  zmq::context_t ctx_;
  std::optional<RouterSocket> router_;
};

TEST_F(WorkerLinkTest, ReturnsWorkAnswersGarbageAndRefusalsAndSwallowsHeartbeats) {
  auto link = WorkerLink::connect(ctx_, router_->last_endpoint(), "w-7", HeartbeatPolicy{}, "an agent");
  ASSERT_TRUE(link.is_ok()) << link.status().to_string();
  link->send(worker_hello(proto::kRoleAgent, "w-7", {"cpu"}, 2));
  std::string peer;
  proto::Envelope hello = next(&peer);
  ASSERT_TRUE(std::holds_alternative<proto::Hello>(hello.body));
  EXPECT_EQ(peer, "w-7");
  EXPECT_EQ(std::get<proto::Hello>(hello.body).worker_id, "w-7");
  EXPECT_EQ(std::get<proto::Hello>(hello.body).capacity, 2u);
  EXPECT_FALSE(std::get<proto::Hello>(hello.body).node.empty());

  // Heartbeats and errors are not work; the task after them is.
  to_worker(peer, proto::Heartbeat{});
  to_worker(peer, proto::Error{std::string(proto::kErrorBadMessage), "x", "c-0"});
  proto::ProposeTask task;
  task.task_id = "p-1";
  task.target = "reduce";
  to_worker(peer, task);
  std::optional<proto::Envelope> got = pump(*link);
  ASSERT_TRUE(got.has_value());
  ASSERT_TRUE(std::holds_alternative<proto::ProposeTask>(got->body));
  EXPECT_EQ(std::get<proto::ProposeTask>(got->body).task_id, "p-1");

  // Bytes that are no message: answered with an error, nothing returned to the daemon.
  ASSERT_TRUE(router_->send(peer, "\xc1 not msgpack").is_ok());
  EXPECT_FALSE(pump(*link, 3).has_value());
  proto::Envelope garbage = next();
  ASSERT_TRUE(std::holds_alternative<proto::Error>(garbage.body));

  // A message the role does not take: refused, naming the role and the type.
  link->refuse(*got);
  proto::Envelope refused = next();
  ASSERT_TRUE(std::holds_alternative<proto::Error>(refused.body));
  const auto& e = std::get<proto::Error>(refused.body);
  EXPECT_EQ(e.code, proto::kErrorBadMessage);
  EXPECT_NE(e.message.find("an agent does not accept 'propose'"), std::string::npos) << e.message;
}

TEST_F(WorkerLinkTest, ACoordinatorThatFallsSilentIsReconnectedAndAnnouncedToAgain) {
  auto link =
      WorkerLink::connect(ctx_, router_->last_endpoint(), "w-8", fast_heartbeat(), "an evaluator");
  ASSERT_TRUE(link.is_ok()) << link.status().to_string();
  int announced = 0;
  auto announce = [&] {
    ++announced;
    link->send(worker_hello(proto::kRoleEvaluator, "w-8", {"cpu"}, 1));
  };
  announce();
  ASSERT_TRUE(std::holds_alternative<proto::Hello>(next().body));
  // The coordinator says nothing: first heartbeats, then (after 60 ms of silence) a reconnect
  // and a second hello under the same identity.
  bool heartbeat = false;
  const bool hello_again = until_silent_coordinator_sees(
      *link, announce, [&](const RoutedMessage& m, const proto::Envelope& env) {
        heartbeat = heartbeat || std::holds_alternative<proto::Heartbeat>(env.body);
        if (!std::holds_alternative<proto::Hello>(env.body)) return false;
        // The new socket takes over the identity (ROUTER_HANDOVER); a heartbeat still in the old
        // connection's pipe may arrive under an id the ROUTER made up, so only the hello is
        // checked.
        EXPECT_EQ(m.peer, "w-8");
        return true;
      });
  EXPECT_TRUE(heartbeat);
  EXPECT_TRUE(hello_again);
  EXPECT_EQ(announced, 2);
}

// A coordinator that does not know the worker (it dropped it as silent, or restarted) says so: the
// worker announces itself again at once, without waiting for a liveness timeout. A refusal
// reaches the daemon as a bye that ends it.
TEST_F(WorkerLinkTest, AnUnknownPeerReplyMakesTheWorkerAnnounceAgainAndARefusalEndsIt) {
  auto link =
      WorkerLink::connect(ctx_, router_->last_endpoint(), "w-9", HeartbeatPolicy{}, "an evaluator");
  ASSERT_TRUE(link.is_ok()) << link.status().to_string();
  int announced = 0;
  std::atomic<bool> stop{false};
  auto announce = [&] {
    ++announced;
    link->send(evaluator_hello("w-9", "cpu", 1, "", "cpu/test", {}));
  };
  announce();
  std::string peer;
  ASSERT_TRUE(std::holds_alternative<proto::Hello>(next(&peer).body));
  to_worker(peer, proto::Error{std::string(proto::kErrorUnknownPeer), "say hello first", ""});
  EXPECT_FALSE(pump(*link, 3).has_value());
  link->keep_alive(stop, announce);
  EXPECT_EQ(announced, 2);
  ASSERT_TRUE(std::holds_alternative<proto::Hello>(next().body));

  to_worker(peer, proto::Error{std::string(proto::kErrorRefused), "its target 'x' differs", ""});
  std::optional<proto::Envelope> got = pump(*link);
  ASSERT_TRUE(got.has_value());
  auto* bye = std::get_if<proto::Bye>(&got->body);
  ASSERT_NE(bye, nullptr);
  std::optional<Status> end = link->after_bye(*bye);
  ASSERT_TRUE(end.has_value());
  EXPECT_FALSE(end->is_ok());
  EXPECT_NE(end->message().find("its target 'x' differs"), std::string::npos);
  EXPECT_FALSE(
      link->after_bye(proto::Bye{"restarting", std::string(proto::kByeStopping)}).has_value());
  std::optional<Status> finished =
      link->after_bye(proto::Bye{"done", std::string(proto::kByeFinished)});
  ASSERT_TRUE(finished.has_value());
  EXPECT_TRUE(finished->is_ok());
}

// Every hello a link sends carries its session, the same after a reconnect; another link (another
// process) with the same worker id has another. A refusal that names another session went to this
// process by mistake (the two take the routing id from each other): it does not end this one.
TEST_F(WorkerLinkTest, HellosCarryOneSessionPerLinkAndARefusalOfAnotherSessionIsIgnored) {
  auto link =
      WorkerLink::connect(ctx_, router_->last_endpoint(), "gpu0", fast_heartbeat(), "an evaluator");
  ASSERT_TRUE(link.is_ok()) << link.status().to_string();
  auto announce = [&] { link->send(evaluator_hello("gpu0", "cpu", 1, "", "cpu/test", {})); };
  announce();
  std::string peer;
  proto::Envelope first = next(&peer);
  ASSERT_TRUE(std::holds_alternative<proto::Hello>(first.body));
  const std::string session = std::get<proto::Hello>(first.body).session;
  EXPECT_EQ(session, link->session());
  EXPECT_EQ(session.size(), 18u) << session;  // "w-" and 16 hex digits

  // The coordinator falls silent: the link reconnects and announces with the same session.
  std::optional<proto::Hello> again;
  until_silent_coordinator_sees(*link, announce,
                                [&](const RoutedMessage&, const proto::Envelope& env) {
                                  if (auto* h = std::get_if<proto::Hello>(&env.body)) again = *h;
                                  return again.has_value();
                                });
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->session, session);

  auto other = WorkerLink::connect(ctx_, router_->last_endpoint(), "gpu0-b", HeartbeatPolicy{},
                                   "an evaluator");
  ASSERT_TRUE(other.is_ok());
  EXPECT_NE(other->session(), session);

  proto::Error for_other{std::string(proto::kErrorRefused), "worker id 'gpu0' is in use", "",
                         other->session()};
  to_worker("gpu0", for_other);
  EXPECT_FALSE(pump(*link, 3).has_value());
  proto::Error for_this{std::string(proto::kErrorRefused), "worker id 'gpu0' is in use", "",
                        session};
  to_worker("gpu0", for_this);
  std::optional<proto::Envelope> got = pump(*link);
  ASSERT_TRUE(got.has_value());
  auto* bye = std::get_if<proto::Bye>(&got->body);
  ASSERT_NE(bye, nullptr);
  std::optional<Status> end = link->after_bye(*bye);
  ASSERT_TRUE(end.has_value());
  EXPECT_NE(end->message().find("worker id 'gpu0' is in use"), std::string::npos) << end->message();
}

// A task is held until its answer is sent. A copy that arrives meanwhile (the coordinator's
// route to the worker id moved away and back) is not handed to the daemon: the link offers the
// copy's slot back at once. Once answered, the id is work again; a task of a kind the role does
// not take is refused and not held, so a second one is refused too.
TEST_F(WorkerLinkTest, ATaskSentAgainWhileHeldIsNotHandedOverTwice) {
  auto link = WorkerLink::connect(ctx_, router_->last_endpoint(), "w-10", HeartbeatPolicy{},
                                  "an evaluator");
  ASSERT_TRUE(link.is_ok()) << link.status().to_string();
  link->send(evaluator_hello("w-10", "cpu", 2, "", "cpu/test", {}));
  std::string peer;
  ASSERT_TRUE(std::holds_alternative<proto::Hello>(next(&peer).body));
  proto::EvaluateTask task;
  task.task_id = "t-1";
  task.target = "reduce";
  to_worker(peer, task);
  to_worker(peer, task);
  std::optional<proto::Envelope> got = pump(*link);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(std::get<proto::EvaluateTask>(got->body).task_id, "t-1");
  EXPECT_EQ(link->tasks_held(), 1u);
  EXPECT_FALSE(pump(*link, 3).has_value()) << "the copy was handed over";
  proto::Envelope credit = next();
  ASSERT_TRUE(std::holds_alternative<proto::Credit>(credit.body));
  EXPECT_EQ(std::get<proto::Credit>(credit.body).count, 1u);

  proto::EvaluationResult answer;
  answer.task_id = "t-1";
  link->send(answer);
  EXPECT_EQ(link->tasks_held(), 0u);
  ASSERT_TRUE(std::holds_alternative<proto::EvaluationResult>(next().body));
  to_worker(peer, task);
  got = pump(*link);
  ASSERT_TRUE(got.has_value()) << "an answered task's id was not taken again";
  EXPECT_EQ(link->tasks_held(), 1u);

  proto::ProposeTask other;
  other.task_id = "p-1";
  other.target = "reduce";
  for (int i = 0; i < 2; ++i) {
    to_worker(peer, other);
    got = pump(*link);
    ASSERT_TRUE(got.has_value()) << "copy " << i;
    link->refuse(*got);
    proto::Envelope refused = next();
    ASSERT_TRUE(std::holds_alternative<proto::Error>(refused.body)) << "copy " << i;
  }
  EXPECT_EQ(link->tasks_held(), 1u);
}

}  // namespace
}  // namespace kiln::net
