// CURVE with the ZAP allow-list over real TCP sockets on loopback: who gets a message through to
// the ROUTER, with which user id, and what the coordinator counts and logs about the others.
#include "shared/zap_auth.h"

#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <thread>

#include "shared/transport.h"

namespace kiln::net {
namespace {

using Clock = std::chrono::steady_clock;

bool eventually(const std::function<bool()>& done, int timeout_ms = 5000) {
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  while (Clock::now() < deadline) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return done();
}

// Sends the default logger's lines to a string for the life of the object.
class CapturedLog {
 public:
  CapturedLog() : previous_(spdlog::default_logger()) {
    auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(text_);
    auto logger = std::make_shared<spdlog::logger>("captured", sink);
    logger->set_level(spdlog::level::debug);
    logger->flush_on(spdlog::level::trace);
    spdlog::set_default_logger(logger);
  }
  ~CapturedLog() { spdlog::set_default_logger(previous_); }
  std::string text() {
    spdlog::default_logger()->flush();
    return text_.str();
  }
  size_t count(const std::string& part) {
    const std::string all = text();
    size_t n = 0;
    for (size_t at = all.find(part); at != std::string::npos; at = all.find(part, at + 1)) ++n;
    return n;
  }

 private:
  std::ostringstream text_;
  std::shared_ptr<spdlog::logger> previous_;
};

class ZapAuthTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = *generate_curve_keypair();
    alpha_ = *generate_curve_keypair();
    beta_ = *generate_curve_keypair();
    AllowList allowed;
    allowed.names_by_key = {{alpha_.public_key, "alpha"}, {beta_.public_key, "beta"}};
    allowed.source = "test-list";
    Result<std::unique_ptr<ZapAuthenticator>> auth = ZapAuthenticator::start(ctx_, allowed);
    ASSERT_TRUE(auth.is_ok()) << auth.status().to_string();
    auth_ = std::move(auth).value();
    Result<RouterSocket> router = RouterSocket::bind(ctx_, "tcp://127.0.0.1:*", SocketOptions{},
                                                     {server_.public_key, server_.secret_key});
    ASSERT_TRUE(router.is_ok()) << router.status().to_string();
    router_.emplace(std::move(router).value());
    ASSERT_TRUE(auth_->watch(router_->handle()).is_ok());
  }
  void TearDown() override {
    router_.reset();
    auth_.reset();
  }

  CurveClient client(const CurveKeyPair& own, const std::string& server_key) {
    return {own.public_key, own.secret_key, server_key};
  }
  DealerSocket dealer(const CurveClient& curve, const std::string& identity = "") {
    Result<DealerSocket> d =
        DealerSocket::connect(ctx_, router_->last_endpoint(), SocketOptions{}, identity, curve);
    EXPECT_TRUE(d.is_ok()) << d.status().to_string();
    return std::move(d).value();
  }
  std::optional<RoutedMessage> receive(int timeout_ms) {
    Result<std::optional<RoutedMessage>> got = router_->receive(timeout_ms);
    EXPECT_TRUE(got.is_ok()) << got.status().to_string();
    return got.is_ok() ? *got : std::nullopt;
  }

  CapturedLog log_;  // before the sockets: it outlives the handler thread
  zmq::context_t ctx_;
  CurveKeyPair server_, alpha_, beta_;
  std::unique_ptr<ZapAuthenticator> auth_;
  std::optional<RouterSocket> router_;
};

TEST_F(ZapAuthTest, AdmitsAllowedKeysAndNamesEachMessagesKey) {
  DealerSocket a = dealer(client(alpha_, server_.public_key), "w-a");
  DealerSocket b = dealer(client(beta_, server_.public_key), "w-b");
  ASSERT_TRUE(a.send("from alpha").is_ok());
  ASSERT_TRUE(b.send("from beta").is_ok());
  std::map<std::string, std::string> key_of;
  for (int i = 0; i < 2; ++i) {
    std::optional<RoutedMessage> m = receive(5000);
    ASSERT_TRUE(m.has_value());
    key_of[m->payload] = m->user_id;
    if (m->payload == "from alpha") {
      EXPECT_EQ(m->peer, "w-a");
    }
  }
  EXPECT_EQ(key_of["from alpha"], "alpha");
  EXPECT_EQ(key_of["from beta"], "beta");
  // Both ways: the router's answer reaches the worker over the encrypted link.
  ASSERT_TRUE(router_->send("w-a", "hello alpha").is_ok());
  Result<std::optional<std::string>> back = a.receive(5000);
  ASSERT_TRUE(back.is_ok() && back->has_value());
  EXPECT_EQ(**back, "hello alpha");
  EXPECT_EQ(auth_->counters().admitted, 2u);
  EXPECT_EQ(auth_->counters().refused_keys, 0u);
}

TEST_F(ZapAuthTest, UnknownKeyPlainPeerAndWrongServerKeyDeliverNothing) {
  const CurveKeyPair stranger = *generate_curve_keypair();
  const CurveKeyPair impostor = *generate_curve_keypair();  // not the coordinator
  DealerSocket unknown = dealer(client(stranger, server_.public_key));
  DealerSocket plain = dealer(CurveClient{});
  DealerSocket wrong_server =
      dealer(client(alpha_, impostor.public_key));  // an allowed key, but deceived
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(unknown.send("unknown " + std::to_string(i)).is_ok());
    ASSERT_TRUE(plain.send("plain " + std::to_string(i)).is_ok());
    ASSERT_TRUE(wrong_server.send("wrong server " + std::to_string(i)).is_ok());
  }
  std::optional<RoutedMessage> got = receive(2000);
  EXPECT_FALSE(got.has_value()) << "delivered: " << got->payload;
  ASSERT_TRUE(eventually([&] {
    const AuthCounters c = auth_->counters();
    return c.refused_keys >= 1 && c.failed_handshakes >= 2;
  })) << log_.text();
  EXPECT_EQ(auth_->counters().admitted, 0u);

  const std::string text = log_.text();
  EXPECT_NE(text.find("refused a worker from 127.0.0.1: its CURVE key " + stranger.public_key),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("does not use CURVE"), std::string::npos) << text;
  EXPECT_NE(text.find("did not decrypt"), std::string::npos) << text;
  EXPECT_NE(text.find("refused a handshake from 127.0.0.1:"), std::string::npos)
      << text;  // the peer's port too

  // The coordinator keeps serving: an allowed worker gets through afterwards.
  DealerSocket a = dealer(client(alpha_, server_.public_key));
  ASSERT_TRUE(a.send("still here").is_ok());
  for (;;) {
    std::optional<RoutedMessage> m = receive(5000);
    ASSERT_TRUE(m.has_value());
    EXPECT_EQ(m->user_id, "alpha");
    EXPECT_EQ(m->payload, "still here");
    break;
  }
}

TEST_F(ZapAuthTest, RefusalsAreCountedButTheLogIsRateLimited) {
  std::vector<DealerSocket> strangers;
  for (int i = 0; i < 3 * kLoggedPerMinute; ++i) {
    strangers.push_back(dealer(client(*generate_curve_keypair(), server_.public_key)));
    ASSERT_TRUE(strangers.back().send("x").is_ok());
  }
  ASSERT_TRUE(eventually([&] { return auth_->counters().refused_keys >= 3u * kLoggedPerMinute; }))
      << auth_->counters().refused_keys;
  EXPECT_FALSE(receive(200).has_value());
  EXPECT_EQ(log_.count("refused a worker from"), static_cast<size_t>(kLoggedPerMinute))
      << log_.text();
}

TEST_F(ZapAuthTest, ReconnectKeepsTheCurveKeys) {
  DealerSocket a = dealer(client(alpha_, server_.public_key), "w-a");
  ASSERT_TRUE(a.send("before").is_ok());
  std::optional<RoutedMessage> m = receive(5000);
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->user_id, "alpha");
  ASSERT_TRUE(a.reconnect().is_ok());
  ASSERT_TRUE(a.send("after").is_ok());
  m = receive(5000);
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->payload, "after");
  EXPECT_EQ(m->user_id, "alpha");
  EXPECT_EQ(auth_->counters().failed_handshakes, 0u);
}

TEST_F(ZapAuthTest, OneHandlerPerContext) {
  AllowList allowed;
  allowed.names_by_key = {{alpha_.public_key, "alpha"}};
  Result<std::unique_ptr<ZapAuthenticator>> second = ZapAuthenticator::start(ctx_, allowed);
  ASSERT_FALSE(second.is_ok());
  EXPECT_EQ(second.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(second.status().message().find("another ZAP handler"), std::string::npos);
}

// With no handler serving the context, a CURVE ROUTER admits nobody (it does not fall back to
// "encrypted but unauthenticated").
TEST(ZapAuth, WithoutAHandlerNobodyIsAdmitted) {
  zmq::context_t ctx;
  const CurveKeyPair server = *generate_curve_keypair(), worker = *generate_curve_keypair();
  Result<RouterSocket> router = RouterSocket::bind(ctx, "tcp://127.0.0.1:*", SocketOptions{},
                                                   {server.public_key, server.secret_key});
  ASSERT_TRUE(router.is_ok()) << router.status().to_string();
  Result<DealerSocket> d =
      DealerSocket::connect(ctx, router->last_endpoint(), SocketOptions{}, "",
                            {worker.public_key, worker.secret_key, server.public_key});
  ASSERT_TRUE(d.is_ok());
  ASSERT_TRUE(d->send("let me in").is_ok());
  Result<std::optional<RoutedMessage>> got = router->receive(1500);
  ASSERT_TRUE(got.is_ok());
  EXPECT_FALSE(got->has_value());
}

TEST(ZapAuth, MalformedKeysAreRefusedBeforeAnySocket) {
  zmq::context_t ctx;
  Result<RouterSocket> router =
      RouterSocket::bind(ctx, "tcp://127.0.0.1:*", SocketOptions{}, {"short", "short"});
  ASSERT_FALSE(router.is_ok());
  EXPECT_EQ(router.status().code(), StatusCode::kInvalidArgument);
  Result<DealerSocket> d =
      DealerSocket::connect(ctx, "tcp://127.0.0.1:1", SocketOptions{}, "", {"a", "b", "c"});
  ASSERT_FALSE(d.is_ok());
  EXPECT_NE(d.status().message().find("kiln keys new"), std::string::npos);
}

}  // namespace
}  // namespace kiln::net
