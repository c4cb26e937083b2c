// Test support: an HTTP/1.1 server on 127.0.0.1 (plain POSIX sockets, its own threads) that
// plays an LLM provider. Every POST is recorded and answered by a script: a queue of scripted
// responses, then a responder function for whatever the queue does not cover. A response can be
// any status, headers and body (good OpenAI or Anthropic replies, malformed JSON, 429 with
// Retry-After, 500, an enormous body) or `hang`: the connection is held open, unanswered, until
// the server stops. One connection per request (the client may reuse none of them).
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace kiln::testing {

struct FakeHttpRequest {
  std::string method;
  std::string path;
  std::map<std::string, std::string> headers;  // names lower-cased
  std::string body;
};

struct FakeHttpResponse {
  int status = 200;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  bool hang = false;  // never answer

  static FakeHttpResponse json(int status, std::string body);
  static FakeHttpResponse never();
};

// Bodies of the two wire formats with `text` as the model's reply.
std::string openai_reply(const std::string& text, int prompt_tokens = 100, int completion_tokens = 50);
std::string anthropic_reply(const std::string& text, int input_tokens = 100, int output_tokens = 50);

// The text of a model reply in kiln's format: a ```<lang> block with `source` and a ```json block
// with `params_json` (e.g. {"UNROLL": 8}) unless it is empty.
std::string kernel_reply(const std::string& source, const std::string& params_json, const std::string& lang = "cpp");

class FakeLlmServer {
 public:
  using Responder = std::function<FakeHttpResponse(const FakeHttpRequest&)>;

  // Listens on 127.0.0.1 at a free port. `responder` answers requests the queue does not cover;
  // without one they get a 500.
  explicit FakeLlmServer(Responder responder = nullptr);
  ~FakeLlmServer();
  FakeLlmServer(const FakeLlmServer&) = delete;
  FakeLlmServer& operator=(const FakeLlmServer&) = delete;

  bool started() const { return listen_fd_ >= 0; }
  int port() const { return port_; }
  std::string url() const;  // "http://127.0.0.1:<port>"

  void push(FakeHttpResponse response);  // answers the next request, before the responder
  std::vector<FakeHttpRequest> requests() const;
  size_t request_count() const;
  // Waits until at least `n` requests arrived or `timeout_ms` passed; returns whether they did.
  bool wait_for_requests(size_t n, int timeout_ms) const;

 private:
  void accept_loop();
  void serve(int fd);

  Responder responder_;
  int listen_fd_ = -1;
  int port_ = 0;
  int wake_[2] = {-1, -1};  // closing the write end wakes every waiting thread
  std::atomic<bool> stopping_{false};
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  std::deque<FakeHttpResponse> script_;
  std::vector<FakeHttpRequest> requests_;
  std::vector<std::thread> connections_;
  std::thread acceptor_;
};

}  // namespace kiln::testing
