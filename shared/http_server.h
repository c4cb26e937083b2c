// A small HTTP/1.1 server for read-only endpoints (the coordinator's /status, /metrics, probes and
// live page; docs/observe.md). One thread, poll(2) over non-blocking sockets, GET and HEAD only,
// one request per connection (Connection: close).
//
// Why our own instead of a library such as cpp-httplib: those serve each connection from a thread
// pool with a per-read timeout, so a client that sends one byte a second holds a pool thread for
// as long as it likes, and a few such clients make every scrape wait. Here every connection has a
// deadline for its whole request and another for its whole response, the number of connections
// is bounded (a new one over the limit evicts the oldest that has not finished its request), a
// request head is bounded in bytes, and nothing a client does can block the thread: a slow or
// malformed client costs a few kilobytes until its deadline, and everyone else is served
// meanwhile. The handler runs on the server thread and must be quick (it reads a snapshot).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "shared/status.h"

namespace kiln::net {

struct HttpRequest {
  std::string method;  // "GET" or "HEAD" (others never reach the handler)
  std::string path;    // without the query, e.g. "/metrics"
  std::string query;   // after '?', undecoded; "" when none
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
};

struct HttpServerOptions {
  // HOST:PORT to listen on: "127.0.0.1:9464", "[::1]:0", "0.0.0.0:9464"; port 0 picks a free one.
  std::string bind = "127.0.0.1:0";
  size_t max_connections = 64;
  size_t max_request_bytes = 8192;                    // the request line and headers together
  std::chrono::milliseconds request_timeout{5000};    // for the whole request head to arrive
  std::chrono::milliseconds response_timeout{10000};  // for the whole response to be taken
};

struct HttpCounters {
  uint64_t accepted = 0;   // connections
  uint64_t served = 0;     // requests answered by the handler
  uint64_t refused = 0;    // answered with 400/405/414/431 without reaching the handler
  uint64_t timed_out = 0;  // closed at a deadline
  uint64_t evicted = 0;    // closed to make room for a new connection
};

class HttpServer {
 public:
  using Handler = std::function<HttpResponse(const HttpRequest&)>;

  // Binds, listens and starts the server thread. INVALID_ARGUMENT for a bind that does not
  // parse, UNAVAILABLE when the address cannot be bound (in use, not ours).
  static Result<std::unique_ptr<HttpServer>> start(HttpServerOptions options, Handler handler);

  // Stops the thread and closes every connection.
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  uint16_t port() const { return port_; }
  // "http://HOST:PORT" as bound (the port resolved when 0 was asked for).
  std::string url() const;

  HttpCounters counters() const;

 private:
  HttpServer(HttpServerOptions options, Handler handler, int listen_fd, int wake_fd,
             std::string host, uint16_t port);
  void loop();

  HttpServerOptions options_;
  Handler handler_;
  int listen_fd_ = -1;
  int wake_fd_ = -1;  // an eventfd the destructor signals
  std::string host_;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> accepted_{0}, served_{0}, refused_{0}, timed_out_{0}, evicted_{0};
  std::thread thread_;
};

// "HOST:PORT" split; "[v6]:PORT" is accepted. INVALID_ARGUMENT naming what is wrong.
Result<std::pair<std::string, uint16_t>> parse_host_port(const std::string& text);

}  // namespace kiln::net
