// The Dispatcher with CURVE on (real redis-server, real sockets): workers are admitted by key, the
// key's name follows the worker, and one allowed key cannot take over another key's worker id.
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <optional>

#include "coordinator/dispatcher.h"
#include "tests/support/test_env.h"

namespace kiln::coordinator {
namespace {

class CurveWorker {
 public:
  CurveWorker(zmq::context_t& ctx, const std::string& endpoint, const net::CurveKeyPair& own,
              const std::string& server_key, const std::string& worker_id)
      : ids_(worker_id) {
    auto d = net::DealerSocket::connect(ctx, endpoint, net::SocketOptions{}, "",
                                        {own.public_key, own.secret_key, server_key});
    EXPECT_TRUE(d.is_ok()) << d.status().to_string();
    dealer_.emplace(std::move(d).value());
    proto::Hello hello;
    hello.role = "evaluator";
    hello.node = "test";
    hello.worker_id = worker_id;
    hello.backends = {"cpu"};
    hello.capacity = 1;
    send(hello);
  }
  void send(proto::Message body) {
    ASSERT_TRUE(
        dealer_->send(proto::encode({proto::kProtocolVersion, ids_.next(), std::move(body)}))
            .is_ok());
  }
  std::optional<proto::Envelope> next() {
    while (true) {
      auto got = dealer_->receive(0);
      if (!got.is_ok() || !got->has_value()) return std::nullopt;
      auto env = proto::decode(**got);
      if (env.is_ok() && std::holds_alternative<proto::Heartbeat>(env->body)) continue;
      if (env.is_ok()) return std::move(env).value();
    }
  }

 private:
  proto::IdGenerator ids_;
  std::optional<net::DealerSocket> dealer_;
};

class DispatcherCurveTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(testing::connect_store(server_, &client_, &store_), "");
    coordinator_ = *net::generate_curve_keypair();
    alpha_ = *net::generate_curve_keypair();
    beta_ = *net::generate_curve_keypair();
    DispatcherOptions o;
    o.curve = {coordinator_.public_key, coordinator_.secret_key};
    o.allowed.names_by_key = {{alpha_.public_key, "alpha"}, {beta_.public_key, "beta"}};
    o.allowed.source = "test";
    auto d = Dispatcher::create(ctx_, *store_, o);
    ASSERT_TRUE(d.is_ok()) << d.status().to_string();
    dispatcher_ = std::move(d).value();
  }
  bool run_until(const std::function<bool()>& done) {
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (std::chrono::steady_clock::now() < give_up) {
      for (CurveWorker* w : alive_) w->send(proto::Heartbeat{});
      auto r = dispatcher_->poll(10);
      EXPECT_TRUE(r.is_ok()) << r.status().to_string();
      if (done()) return true;
    }
    return false;
  }

  testing::RedisServer server_;
  std::optional<redis::RedisClient> client_;
  std::optional<redis::Store> store_;
  zmq::context_t ctx_;
  net::CurveKeyPair coordinator_, alpha_, beta_;
  std::unique_ptr<Dispatcher> dispatcher_;
  std::vector<CurveWorker*> alive_;  // workers that heartbeat on every turn
};

TEST_F(DispatcherCurveTest, AnotherKeyCannotTakeOverAWorkerId) {
  CurveWorker first(ctx_, dispatcher_->endpoint(), alpha_, coordinator_.public_key, "w1");
  first.send(proto::Credit{1});
  alive_.push_back(&first);
  proto::EvaluateTask t;
  t.task_id = "task-a";
  t.candidate_id = "a";
  t.target = "rmsnorm";
  t.backend = "cpu";
  ASSERT_TRUE(dispatcher_->submit(t));
  std::optional<proto::Envelope> got;
  ASSERT_TRUE(run_until([&] { return (got = first.next()).has_value(); }));
  ASSERT_TRUE(std::holds_alternative<proto::EvaluateTask>(got->body));

  // Same worker id, another allowed key: refused, and w1 keeps its task.
  CurveWorker impostor(ctx_, dispatcher_->endpoint(), beta_, coordinator_.public_key, "w1");
  std::optional<proto::Envelope> answer;
  ASSERT_TRUE(run_until([&] { return (answer = impostor.next()).has_value(); }));
  auto* error = std::get_if<proto::Error>(&answer->body);
  ASSERT_NE(error, nullptr);
  EXPECT_EQ(error->code, proto::kErrorRefused);  // the impostor stops
  EXPECT_NE(error->message.find("in use by another key"), std::string::npos) << error->message;
  EXPECT_EQ(dispatcher_->workers(), 1u);
  EXPECT_EQ(dispatcher_->in_flight(), 1u);
  EXPECT_EQ(dispatcher_->stats().requeued, 0u);

  // The same key reconnecting (a new connection) does take over, as without CURVE.
  CurveWorker again(ctx_, dispatcher_->endpoint(), alpha_, coordinator_.public_key, "w1");
  alive_ = {&again};
  ASSERT_TRUE(run_until([&] { return dispatcher_->stats().requeued == 1; }));
  EXPECT_EQ(dispatcher_->workers(), 1u);
  EXPECT_EQ(dispatcher_->auth_counters().admitted, 3u);
}

TEST_F(DispatcherCurveTest, AnUnknownKeyNeverJoins) {
  const net::CurveKeyPair stranger = *net::generate_curve_keypair();
  CurveWorker outsider(ctx_, dispatcher_->endpoint(), stranger, coordinator_.public_key, "w9");
  outsider.send(proto::Credit{4});
  ASSERT_TRUE(run_until([&] { return dispatcher_->auth_counters().refused_keys >= 1; }));
  run_until([] { return false; });  // a while longer: nothing may arrive late
  EXPECT_EQ(dispatcher_->workers(), 0u);
  EXPECT_EQ(dispatcher_->stats().malformed, 0u);
}

}  // namespace
}  // namespace kiln::coordinator
