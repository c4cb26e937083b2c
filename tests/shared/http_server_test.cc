// The status server's HTTP layer against real sockets: well-formed requests, malformed ones, slow
// clients that hold connections, clients that never read, and a handler that throws.
#include "shared/http_server.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/http_client.h"

namespace kiln::net {
namespace {

using namespace std::chrono_literals;

// Everything the server sends until it closes, or what came before `timeout`.
std::string read_all(int fd, std::chrono::milliseconds timeout = 5s) {
  std::string out;
  auto end = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < end) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 50) <= 0) continue;
    char buf[4096];
    ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

std::string roundtrip(uint16_t port, const std::string& request) {
  int fd = testing::connect_loopback(port);
  if (fd < 0) return "connect failed";
  send(fd, request.data(), request.size(), MSG_NOSIGNAL);
  std::string reply = read_all(fd);
  close(fd);
  return reply;
}

int status_of(const std::string& reply) {
  if (reply.rfind("HTTP/1.1 ", 0) != 0 || reply.size() < 12) return -1;
  return std::stoi(reply.substr(9, 3));
}

std::string body_of(const std::string& reply) {
  size_t p = reply.find("\r\n\r\n");
  return p == std::string::npos ? "" : reply.substr(p + 4);
}

std::unique_ptr<HttpServer> serve(HttpServerOptions o = {}) {
  auto server = HttpServer::start(o, [](const HttpRequest& r) {
    if (r.path == "/throw") throw std::runtime_error("boom");
    if (r.path == "/big") return HttpResponse{200, "text/plain", std::string(8 << 20, 'x')};
    if (r.path != "/hello") return HttpResponse{404, "text/plain", "no such page\n"};
    return HttpResponse{200, "application/json",
                        "{\"path\":\"" + r.path + "\",\"query\":\"" + r.query + "\"}"};
  });
  EXPECT_TRUE(server.is_ok()) << server.status().to_string();
  return std::move(server).value();
}

TEST(HttpServer, AnswersGetAndHead) {
  auto s = serve();
  std::string r = roundtrip(s->port(), "GET /hello?x=1 HTTP/1.1\r\nHost: a\r\n\r\n");
  EXPECT_EQ(status_of(r), 200) << r;
  EXPECT_NE(r.find("Content-Type: application/json\r\n"), std::string::npos);
  EXPECT_NE(r.find("Connection: close\r\n"), std::string::npos);
  EXPECT_EQ(body_of(r), "{\"path\":\"/hello\",\"query\":\"x=1\"}");
  std::string h = roundtrip(s->port(), "HEAD /hello HTTP/1.0\r\n\r\n");
  EXPECT_EQ(status_of(h), 200);
  EXPECT_EQ(body_of(h), "");
  EXPECT_NE(h.find("Content-Length: 28\r\n"), std::string::npos) << h;
  EXPECT_EQ(status_of(roundtrip(s->port(), "GET /nope HTTP/1.1\r\n\r\n")), 404);
  EXPECT_EQ(s->counters().served, 3u);
}

TEST(HttpServer, RefusesMalformedRequestsAndKeepsServing) {
  auto s = serve();
  const uint16_t port = s->port();
  EXPECT_EQ(status_of(roundtrip(port, "POST /hello HTTP/1.1\r\nContent-Length: 2\r\n\r\nhi")), 405);
  EXPECT_NE(roundtrip(port, "DELETE /hello HTTP/1.1\r\n\r\n").find("Allow: GET, HEAD"),
            std::string::npos);
  EXPECT_EQ(status_of(roundtrip(port, std::string("\x00\x01\x02garbage\r\n\r\n", 14))), 400);
  EXPECT_EQ(status_of(roundtrip(port, "GET /hello\r\n\r\n")), 400);
  EXPECT_EQ(status_of(roundtrip(port, "GET /hello HTTP/2.0\r\n\r\n")), 400);
  EXPECT_EQ(status_of(roundtrip(port, "GET http://evil/ HTTP/1.1\r\n\r\n")), 400);
  EXPECT_EQ(status_of(roundtrip(port, "GET /hello HTTP/1.1\r\nno colon here\r\n\r\n")), 400);
  EXPECT_EQ(status_of(roundtrip(port, "GET /" + std::string(3000, 'a') + " HTTP/1.1\r\n\r\n")),
            414);
  EXPECT_EQ(status_of(roundtrip(
                port, "GET /hello HTTP/1.1\r\nX: " + std::string(20000, 'a') + "\r\n\r\n")),
            431);
  EXPECT_EQ(status_of(roundtrip(port, "GET /throw HTTP/1.1\r\n\r\n")), 500);
  EXPECT_EQ(status_of(roundtrip(port, "GET /hello HTTP/1.1\r\n\r\n")), 200);
  EXPECT_GE(s->counters().refused, 9u);
}

TEST(HttpServer, SlowClientsTimeOutAndDoNotStarveOthers) {
  HttpServerOptions o;
  o.max_connections = 8;
  o.request_timeout = 400ms;
  auto s = serve(o);
  // Twice the connection limit of clients that send a request one byte at a time and never end
  // it (a slowloris), plus one that connects and says nothing.
  std::vector<int> slow;
  for (int i = 0; i < 16; ++i) {
    int fd = testing::connect_loopback(s->port());
    ASSERT_GE(fd, 0);
    send(fd, "GET /hel", 8, MSG_NOSIGNAL);
    slow.push_back(fd);
  }
  int silent = testing::connect_loopback(s->port());
  std::atomic<bool> done{false};
  std::thread dribble([&] {
    while (!done.load()) {
      for (int fd : slow) send(fd, "l", 1, MSG_NOSIGNAL);
      std::this_thread::sleep_for(50ms);
    }
  });
  // Served meanwhile: each new client evicts the oldest unfinished one.
  for (int i = 0; i < 5; ++i)
    EXPECT_EQ(status_of(roundtrip(s->port(), "GET /hello HTTP/1.1\r\n\r\n")), 200);
  std::this_thread::sleep_for(600ms);  // past the request deadline
  done.store(true);
  dribble.join();
  HttpCounters c = s->counters();
  EXPECT_GT(c.evicted, 0u);
  EXPECT_GT(c.timed_out, 0u);
  // The silent client was closed by the server: reading it ends (0 bytes) instead of blocking.
  EXPECT_EQ(read_all(silent, 2s), "");
  for (int fd : slow) close(fd);
  close(silent);
  EXPECT_EQ(status_of(roundtrip(s->port(), "GET /hello HTTP/1.1\r\n\r\n")), 200);
}

TEST(HttpServer, AClientThatNeverReadsIsDroppedAtTheResponseDeadline) {
  HttpServerOptions o;
  o.response_timeout = 300ms;
  auto s = serve(o);
  int fd = testing::connect_loopback(s->port());
  int small = 4096;
  setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
  send(fd, "GET /big HTTP/1.1\r\n\r\n", 21, MSG_NOSIGNAL);
  // 8 MiB does not fit in the socket buffers; the server must not wait on it.
  EXPECT_EQ(status_of(roundtrip(s->port(), "GET /hello HTTP/1.1\r\n\r\n")), 200);
  std::this_thread::sleep_for(500ms);
  EXPECT_EQ(status_of(roundtrip(s->port(), "GET /hello HTTP/1.1\r\n\r\n")), 200);
  EXPECT_GE(s->counters().timed_out, 1u);
  close(fd);
}

TEST(HttpServer, BindErrorsSayWhatIsWrong) {
  auto bad =
      HttpServer::start({.bind = "localhost"}, [](const HttpRequest&) { return HttpResponse{}; });
  ASSERT_FALSE(bad.is_ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("HOST:PORT"), std::string::npos);
  auto first = serve();
  auto second = HttpServer::start({.bind = "127.0.0.1:" + std::to_string(first->port())},
                                  [](const HttpRequest&) { return HttpResponse{}; });
  ASSERT_FALSE(second.is_ok());
  EXPECT_EQ(second.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(second.status().message().find("another process listening"), std::string::npos)
      << second.status().message();
  EXPECT_EQ(first->url(), "http://127.0.0.1:" + std::to_string(first->port()));
  // An address no interface has (TEST-NET-1, RFC 5737) is not a busy port: the hint says so.
  auto elsewhere =
      HttpServer::start({.bind = "192.0.2.1:0"}, [](const HttpRequest&) { return HttpResponse{}; });
  if (elsewhere.is_ok()) GTEST_SKIP() << "this host binds any address (net.ipv4.ip_nonlocal_bind)";
  EXPECT_NE(elsewhere.status().message().find("no interface of this machine has that address"),
            std::string::npos)
      << elsewhere.status().message();
  EXPECT_EQ(elsewhere.status().message().find("another process"), std::string::npos)
      << elsewhere.status().message();
}

TEST(HttpServer, ParsesHostPort) {
  EXPECT_EQ(parse_host_port("0.0.0.0:9464").value(),
            std::make_pair(std::string("0.0.0.0"), uint16_t{9464}));
  EXPECT_EQ(parse_host_port("[::1]:0").value(), std::make_pair(std::string("::1"), uint16_t{0}));
  EXPECT_FALSE(parse_host_port(":80").is_ok());
  EXPECT_FALSE(parse_host_port("host:").is_ok());
  EXPECT_FALSE(parse_host_port("host:70000").is_ok());
  EXPECT_FALSE(parse_host_port("host:8a").is_ok());
  // Brackets hold an IPv6 address only.
  EXPECT_TRUE(parse_host_port("[fe80::1%eth0]:0").is_ok());
  for (const char* bad : {"[localhost]:0", "[127.0.0.1]:0", "[zz]:0"}) {
    auto r = parse_host_port(bad);
    ASSERT_FALSE(r.is_ok()) << bad;
    EXPECT_NE(r.status().message().find("is not an IPv6 address"), std::string::npos) << bad;
  }
}

// url() writes the address as bound, in numbers: a name or "*" resolved, so that the URL kiln
// writes to <out>/http can be opened.
TEST(HttpServer, TheUrlNamesTheBoundAddress) {
  auto any =
      HttpServer::start({.bind = "0.0.0.0:0"}, [](const HttpRequest&) { return HttpResponse{}; });
  ASSERT_TRUE(any.is_ok()) << any.status().to_string();
  EXPECT_EQ((*any)->url(), "http://0.0.0.0:" + std::to_string((*any)->port()));
  auto named =
      HttpServer::start({.bind = "localhost:0"}, [](const HttpRequest&) { return HttpResponse{}; });
  ASSERT_TRUE(named.is_ok()) << named.status().to_string();
  const std::string url = (*named)->url();
  EXPECT_TRUE(url == "http://127.0.0.1:" + std::to_string((*named)->port()) ||
              url == "http://[::1]:" + std::to_string((*named)->port()))
      << url;
}

}  // namespace
}  // namespace kiln::net
