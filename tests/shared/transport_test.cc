// Tests of the ZeroMQ transport over real inproc:// and loopback tcp:// sockets.
#include "shared/transport.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <thread>

namespace kiln::net {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kWaitMs = 2000;  // generous upper bound for things that should happen at once

// A raw socket for sending shapes our wrappers never send. Linger 0 so the context can close.
zmq::socket_t raw_socket(zmq::context_t& context, zmq::socket_type type) {
  zmq::socket_t socket(context, type);
  socket.set(zmq::sockopt::linger, 0);
  return socket;
}

RoutedMessage receive_one(RouterSocket& router) {
  auto message = router.receive(kWaitMs);
  EXPECT_TRUE(message.is_ok()) << message.status().to_string();
  if (!message.is_ok() || !message->has_value()) {
    ADD_FAILURE() << "nothing arrived at the ROUTER";
    return {};
  }
  return std::move(**message);
}

std::string receive_one(DealerSocket& dealer) {
  auto message = dealer.receive(kWaitMs);
  EXPECT_TRUE(message.is_ok()) << message.status().to_string();
  if (!message.is_ok() || !message->has_value()) {
    ADD_FAILURE() << "nothing arrived at the DEALER";
    return {};
  }
  return std::move(**message);
}

void expect_round_trip(const std::string& endpoint) {
  zmq::context_t context;
  auto router = RouterSocket::bind(context, endpoint, SocketOptions{});
  ASSERT_TRUE(router.is_ok()) << router.status().to_string();
  auto dealer = DealerSocket::connect(context, router->last_endpoint(), SocketOptions{}, "w1");
  ASSERT_TRUE(dealer.is_ok()) << dealer.status().to_string();

  ASSERT_TRUE(dealer->send("ping").is_ok());
  RoutedMessage request = receive_one(*router);
  EXPECT_EQ(request.peer, "w1");
  EXPECT_EQ(request.payload, "ping");
  ASSERT_TRUE(router->send(request.peer, std::string("po\0ng", 5)).is_ok());
  EXPECT_EQ(receive_one(*dealer), std::string("po\0ng", 5));
}

TEST(Transport, RoundTripOverInproc) { expect_round_trip("inproc://transport-round-trip"); }

TEST(Transport, RoundTripOverTcpOnAnEphemeralPort) { expect_round_trip("tcp://127.0.0.1:*"); }

// Whether this machine can bind an IPv6 socket to `address` (containers often have IPv6 off).
bool ipv6_bindable(const char* address) {
  const int fd = ::socket(AF_INET6, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_in6 a{};
  a.sin6_family = AF_INET6;
  const bool ok = inet_pton(AF_INET6, address, &a.sin6_addr) == 1 &&
                  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  ::close(fd);
  return ok;
}

// A bracketed IPv6 address binds and connects (the sockets get ZMQ_IPV6 for it); a ROUTER on [::]
// also takes a worker that connects over IPv4.
TEST(Transport, RoundTripOverIpv6AndADualStackBind) {
  if (!ipv6_bindable("::1")) GTEST_SKIP() << "this machine has no IPv6 loopback";
  expect_round_trip("tcp://[::1]:*");

  zmq::context_t context;
  auto router = RouterSocket::bind(context, "tcp://[::]:*", SocketOptions{});
  ASSERT_TRUE(router.is_ok()) << router.status().to_string();
  const std::string port = router->last_endpoint().substr(router->last_endpoint().rfind(':') + 1);
  auto v4 = DealerSocket::connect(context, "tcp://127.0.0.1:" + port, SocketOptions{}, "v4");
  ASSERT_TRUE(v4.is_ok()) << v4.status().to_string();
  ASSERT_TRUE(v4->send("over ipv4").is_ok());
  RoutedMessage got = receive_one(*router);
  EXPECT_EQ(got.peer, "v4");
  EXPECT_EQ(got.payload, "over ipv4");
}

TEST(Transport, BindReportsTheActualTcpEndpoint) {
  zmq::context_t context;
  auto router = RouterSocket::bind(context, "tcp://127.0.0.1:*", SocketOptions{});
  ASSERT_TRUE(router.is_ok()) << router.status().to_string();
  EXPECT_EQ(router->last_endpoint().rfind("tcp://127.0.0.1:", 0), 0u);
  EXPECT_EQ(router->last_endpoint().find('*'), std::string::npos);
}

TEST(Transport, RoutesRepliesToTheRightDealerAmongMany) {
  zmq::context_t context;
  auto router = RouterSocket::bind(context, "tcp://127.0.0.1:*", SocketOptions{});
  ASSERT_TRUE(router.is_ok()) << router.status().to_string();
  constexpr int kDealers = 8;
  std::vector<DealerSocket> dealers;
  for (int i = 0; i < kDealers; ++i) {
    auto dealer = DealerSocket::connect(context, router->last_endpoint(), SocketOptions{},
                                        "worker-" + std::to_string(i));
    ASSERT_TRUE(dealer.is_ok()) << dealer.status().to_string();
    dealers.push_back(std::move(*dealer));
  }
  for (auto& dealer : dealers) ASSERT_TRUE(dealer.send("from " + dealer.identity()).is_ok());
  for (int i = 0; i < kDealers; ++i) {
    RoutedMessage request = receive_one(*router);
    EXPECT_EQ(request.payload, "from " + request.peer);
    ASSERT_TRUE(router->send(request.peer, "to " + request.peer).is_ok());
  }
  for (auto& dealer : dealers) EXPECT_EQ(receive_one(dealer), "to " + dealer.identity());
}

TEST(Transport, ReceiveReturnsNothingAfterTheTimeout) {
  zmq::context_t context;
  auto router = RouterSocket::bind(context, "inproc://transport-timeout", SocketOptions{});
  ASSERT_TRUE(router.is_ok());
  auto dealer = DealerSocket::connect(context, "inproc://transport-timeout", SocketOptions{});
  ASSERT_TRUE(dealer.is_ok());

  const auto start = Clock::now();
  auto at_router = router->receive(150);
  auto at_dealer = dealer->receive(150);
  const auto elapsed = Clock::now() - start;
  ASSERT_TRUE(at_router.is_ok()) << at_router.status().to_string();
  ASSERT_TRUE(at_dealer.is_ok()) << at_dealer.status().to_string();
  EXPECT_FALSE(at_router->has_value());
  EXPECT_FALSE(at_dealer->has_value());
  EXPECT_GE(elapsed, std::chrono::milliseconds(280));
  EXPECT_LT(elapsed, std::chrono::milliseconds(kWaitMs));
  EXPECT_EQ(router->receive(-1).status().code(), StatusCode::kInvalidArgument);
}

TEST(Transport, OversizedMessageIsDroppedAndTheRouterKeepsServing) {
  zmq::context_t context;
  SocketOptions small;
  small.max_message_bytes = 1024;
  auto router = RouterSocket::bind(context, "tcp://127.0.0.1:*", small);
  ASSERT_TRUE(router.is_ok()) << router.status().to_string();

  // A raw DEALER with a monitor, to see the ROUTER close its connection.
  zmq::socket_t big = raw_socket(context, zmq::socket_type::dealer);
  ASSERT_EQ(zmq_socket_monitor(big.handle(), "inproc://oversize-monitor", ZMQ_EVENT_DISCONNECTED),
            0);
  zmq::socket_t monitor = raw_socket(context, zmq::socket_type::pair);
  monitor.connect("inproc://oversize-monitor");
  big.connect(router->last_endpoint());
  ASSERT_TRUE(big.send(zmq::buffer(std::string(4096, 'x')), zmq::send_flags::none));

  std::vector<zmq_pollitem_t> items = {{monitor.handle(), 0, ZMQ_POLLIN, 0}};
  ASSERT_EQ(zmq::poll(items, std::chrono::milliseconds(kWaitMs)), 1)
      << "the ROUTER did not close the oversized sender's connection";
  zmq::message_t event;
  ASSERT_TRUE(monitor.recv(event, zmq::recv_flags::dontwait));
  uint16_t event_id = 0;
  std::memcpy(&event_id, event.data(), sizeof event_id);
  EXPECT_EQ(event_id, ZMQ_EVENT_DISCONNECTED);

  auto dropped = router->receive(100);
  ASSERT_TRUE(dropped.is_ok()) << dropped.status().to_string();
  EXPECT_FALSE(dropped->has_value());

  auto good = DealerSocket::connect(context, router->last_endpoint(), small, "good");
  ASSERT_TRUE(good.is_ok());
  ASSERT_TRUE(good->send("small").is_ok());
  RoutedMessage request = receive_one(*router);
  EXPECT_EQ(request.peer, "good");
  EXPECT_EQ(request.payload, "small");
  ASSERT_TRUE(router->send("good", "answer").is_ok());
  EXPECT_EQ(receive_one(*good), "answer");
  zmq_socket_monitor(big.handle(), nullptr, 0);
}

TEST(Transport, SendingToAnUnknownPeerIsUnavailableWithoutBlocking) {
  zmq::context_t context;
  auto router = RouterSocket::bind(context, "inproc://transport-unknown", SocketOptions{});
  ASSERT_TRUE(router.is_ok());
  const auto start = Clock::now();
  Status status = router->send("nobody", "hello?");
  EXPECT_EQ(status.code(), StatusCode::kUnavailable) << status.to_string();
  EXPECT_NE(status.message().find("nobody"), std::string::npos) << status.message();
  EXPECT_LT(Clock::now() - start, std::chrono::milliseconds(500));
}

TEST(Transport, MalformedFrameShapesAreErrorsAndTheRouterKeepsWorking) {
  zmq::context_t context;
  auto router = RouterSocket::bind(context, "tcp://127.0.0.1:*", SocketOptions{});
  ASSERT_TRUE(router.is_ok());
  zmq::socket_t raw = raw_socket(context, zmq::socket_type::dealer);
  raw.set(zmq::sockopt::routing_id, "raw");
  raw.connect(router->last_endpoint());

  raw.send(zmq::str_buffer("a"), zmq::send_flags::sndmore);
  raw.send(zmq::str_buffer("b"), zmq::send_flags::sndmore);
  raw.send(zmq::str_buffer("c"), zmq::send_flags::none);
  auto three = router->receive(kWaitMs);
  EXPECT_EQ(three.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(three.status().message().find("'raw'"), std::string::npos) << three.status().message();

  raw.send(zmq::str_buffer("a"), zmq::send_flags::sndmore);  // not an empty delimiter
  raw.send(zmq::str_buffer("b"), zmq::send_flags::none);
  EXPECT_EQ(router->receive(kWaitMs).status().code(), StatusCode::kInvalidArgument);

  raw.send(zmq::str_buffer(""), zmq::send_flags::sndmore);  // REQ-style envelope is accepted
  raw.send(zmq::str_buffer("enveloped"), zmq::send_flags::none);
  RoutedMessage enveloped = receive_one(*router);
  EXPECT_EQ(enveloped.peer, "raw");
  EXPECT_EQ(enveloped.payload, "enveloped");

  auto dealer = DealerSocket::connect(context, router->last_endpoint(), SocketOptions{}, "ok");
  ASSERT_TRUE(dealer.is_ok());
  ASSERT_TRUE(dealer->send("fine").is_ok());
  EXPECT_EQ(receive_one(*router).payload, "fine");
}

TEST(Transport, DealerRejectsMultiFrameMessagesAndKeepsWorking) {
  zmq::context_t context;
  zmq::socket_t raw = raw_socket(context, zmq::socket_type::router);
  raw.bind("inproc://transport-dealer-frames");
  auto dealer =
      DealerSocket::connect(context, "inproc://transport-dealer-frames", SocketOptions{}, "d");
  ASSERT_TRUE(dealer.is_ok());
  raw.send(zmq::str_buffer("d"), zmq::send_flags::sndmore);
  raw.send(zmq::str_buffer("x"), zmq::send_flags::sndmore);
  raw.send(zmq::str_buffer("y"), zmq::send_flags::none);
  EXPECT_EQ(dealer->receive(kWaitMs).status().code(), StatusCode::kInvalidArgument);
  raw.send(zmq::str_buffer("d"), zmq::send_flags::sndmore);
  raw.send(zmq::str_buffer("single"), zmq::send_flags::none);
  EXPECT_EQ(receive_one(*dealer), "single");
}

TEST(Transport, BindToABadEndpointIsInvalidArgumentNamingIt) {
  zmq::context_t context;
  for (const std::string endpoint : {"nonsense://x", "tcp://127.0.0.1", "tcp://127.0.0.1:port"}) {
    auto router = RouterSocket::bind(context, endpoint, SocketOptions{});
    ASSERT_FALSE(router.is_ok()) << endpoint;
    EXPECT_EQ(router.status().code(), StatusCode::kInvalidArgument) << router.status().to_string();
    EXPECT_NE(router.status().message().find(endpoint), std::string::npos)
        << router.status().message();
  }
  auto dealer = DealerSocket::connect(context, "nonsense://x", SocketOptions{});
  EXPECT_EQ(dealer.status().code(), StatusCode::kInvalidArgument);
}

TEST(Transport, BindToAPortInUseFails) {
  zmq::context_t context;
  auto first = RouterSocket::bind(context, "tcp://127.0.0.1:*", SocketOptions{});
  ASSERT_TRUE(first.is_ok());
  auto second = RouterSocket::bind(context, first->last_endpoint(), SocketOptions{});
  ASSERT_FALSE(second.is_ok());
  EXPECT_EQ(second.status().code(), StatusCode::kUnavailable) << second.status().to_string();
  EXPECT_NE(second.status().message().find(first->last_endpoint()), std::string::npos);
}

TEST(Transport, InvalidIdentityOrOptionsAreRejected) {
  zmq::context_t context;
  auto zero = DealerSocket::connect(context, "inproc://x", SocketOptions{}, std::string("\0a", 2));
  EXPECT_EQ(zero.status().code(), StatusCode::kInvalidArgument);
  auto long_id =
      DealerSocket::connect(context, "inproc://x", SocketOptions{}, std::string(256, 'a'));
  EXPECT_EQ(long_id.status().code(), StatusCode::kInvalidArgument);
  SocketOptions endless;
  endless.send_timeout_ms = -1;
  EXPECT_EQ(RouterSocket::bind(context, "inproc://y", endless).status().code(),
            StatusCode::kInvalidArgument);
}

TEST(Transport, DealerWithoutIdentityGetsAStableGeneratedOne) {
  zmq::context_t context;
  auto router = RouterSocket::bind(context, "inproc://transport-generated", SocketOptions{});
  ASSERT_TRUE(router.is_ok());
  auto dealer = DealerSocket::connect(context, "inproc://transport-generated", SocketOptions{});
  ASSERT_TRUE(dealer.is_ok());
  EXPECT_EQ(dealer->identity().rfind("w-", 0), 0u);
  EXPECT_EQ(dealer->identity().size(), 18u);
  ASSERT_TRUE(dealer->send("hi").is_ok());
  EXPECT_EQ(receive_one(*router).peer, dealer->identity());
}

TEST(Transport, DealerReconnectKeepsItsIdentityAcrossARouterRestart) {
  zmq::context_t context;
  std::string endpoint;
  auto dealer = Result<DealerSocket>(unavailable("not yet connected"));
  {
    auto router = RouterSocket::bind(context, "tcp://127.0.0.1:*", SocketOptions{});
    ASSERT_TRUE(router.is_ok());
    endpoint = router->last_endpoint();
    dealer = DealerSocket::connect(context, endpoint, SocketOptions{}, "worker-7");
    ASSERT_TRUE(dealer.is_ok());
    ASSERT_TRUE(dealer->send("hello").is_ok());
    EXPECT_EQ(receive_one(*router).peer, "worker-7");
  }  // the coordinator dies

  // libzmq closes the old listener in its I/O thread, a moment after the socket is destroyed.
  auto restarted = RouterSocket::bind(context, endpoint, SocketOptions{});
  for (int attempt = 0; attempt < 100 && !restarted.is_ok(); ++attempt) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    restarted = RouterSocket::bind(context, endpoint, SocketOptions{});
  }
  ASSERT_TRUE(restarted.is_ok()) << restarted.status().to_string();
  ASSERT_TRUE(dealer->reconnect().is_ok());
  EXPECT_EQ(dealer->identity(), "worker-7");
  ASSERT_TRUE(dealer->send("hello again").is_ok());
  RoutedMessage request = receive_one(*restarted);
  EXPECT_EQ(request.peer, "worker-7");
  EXPECT_EQ(request.payload, "hello again");
  ASSERT_TRUE(restarted->send("worker-7", "welcome back").is_ok());
  EXPECT_EQ(receive_one(*dealer), "welcome back");
}

TEST(Transport, ContextShutdownCancelsReceiveAndSend) {
  zmq::context_t context;
  auto router = RouterSocket::bind(context, "inproc://transport-shutdown", SocketOptions{});
  ASSERT_TRUE(router.is_ok());
  auto dealer = DealerSocket::connect(context, "inproc://transport-shutdown", SocketOptions{});
  ASSERT_TRUE(dealer.is_ok());
  context.shutdown();
  EXPECT_EQ(router->receive(100).status().code(), StatusCode::kCancelled);
  EXPECT_EQ(dealer->send("late").code(), StatusCode::kCancelled);
}

TEST(TransportPoller, WakesForAnInprocWakeupSocketFromAnotherThread) {
  zmq::context_t context;
  auto router = RouterSocket::bind(context, "inproc://poller-router", SocketOptions{});
  ASSERT_TRUE(router.is_ok());
  zmq::socket_t wake_rx = raw_socket(context, zmq::socket_type::pair);
  wake_rx.bind("inproc://poller-wake");
  zmq::socket_t wake_tx = raw_socket(context, zmq::socket_type::pair);
  wake_tx.connect("inproc://poller-wake");

  Poller poller;
  const size_t router_index = poller.add(*router);
  const size_t wake_index = poller.add(wake_rx);
  // The sending thread owns wake_tx until joined (zmq sockets are not thread-safe).
  std::thread pool([&wake_tx] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    wake_tx.send(zmq::str_buffer("compiled"), zmq::send_flags::none);
  });
  const auto start = Clock::now();
  auto ready = poller.wait(kWaitMs);
  const auto elapsed = Clock::now() - start;
  pool.join();
  ASSERT_TRUE(ready.is_ok()) << ready.status().to_string();
  EXPECT_FALSE((*ready)[router_index]);
  EXPECT_TRUE((*ready)[wake_index]);
  EXPECT_LT(elapsed, std::chrono::milliseconds(kWaitMs));
  zmq::message_t note;
  ASSERT_TRUE(wake_rx.recv(note, zmq::recv_flags::dontwait));
  EXPECT_EQ(note.to_string(), "compiled");
}

TEST(TransportPoller, ReportsWhichSocketIsReadableAndTimesOutEmpty) {
  zmq::context_t context;
  auto router = RouterSocket::bind(context, "inproc://poller-which", SocketOptions{});
  ASSERT_TRUE(router.is_ok());
  auto dealer = DealerSocket::connect(context, "inproc://poller-which", SocketOptions{}, "p");
  ASSERT_TRUE(dealer.is_ok());
  Poller poller;
  poller.add(*router);
  poller.add(*dealer);

  auto idle = poller.wait(50);
  ASSERT_TRUE(idle.is_ok());
  EXPECT_EQ(*idle, (std::vector<bool>{false, false}));

  ASSERT_TRUE(dealer->send("x").is_ok());
  auto ready = poller.wait(kWaitMs);
  ASSERT_TRUE(ready.is_ok());
  EXPECT_EQ(*ready, (std::vector<bool>{true, false}));

  // The poller follows the DEALER across reconnect().
  ASSERT_TRUE(dealer->reconnect().is_ok());
  EXPECT_EQ(receive_one(*router).payload, "x");
  ASSERT_TRUE(dealer->send("y").is_ok());
  EXPECT_EQ(receive_one(*router).payload, "y");
  ASSERT_TRUE(router->send("p", "z").is_ok());
  ready = poller.wait(kWaitMs);
  ASSERT_TRUE(ready.is_ok());
  EXPECT_EQ(*ready, (std::vector<bool>{false, true}));
}

}  // namespace
}  // namespace kiln::net
