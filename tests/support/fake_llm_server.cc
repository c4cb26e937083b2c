// Fake LLM provider for tests: see fake_llm_server.h. An acceptor thread polls the listening
// socket and a wake pipe; each connection gets a thread that reads one request (headers, then
// Content-Length bytes), records it and writes the scripted response (or waits on the wake pipe
// for a `hang`). The destructor closes the pipe's write end, which wakes and ends every thread.
#include "tests/support/fake_llm_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>

#include <nlohmann/json.hpp>

namespace kiln::testing {
namespace {

// Waits until `fd` is readable or the wake pipe closes; false on wake or error.
bool wait_readable(int fd, int wake_fd) {
  pollfd fds[2] = {{fd, POLLIN, 0}, {wake_fd, POLLIN, 0}};
  for (;;) {
    const int n = poll(fds, 2, -1);
    if (n < 0) return false;
    if (fds[1].revents) return false;
    if (fds[0].revents) return true;
  }
}

bool write_all(int fd, const std::string& data) {
  size_t off = 0;
  while (off < data.size()) {
    const ssize_t n = ::send(fd, data.data() + off, data.size() - off, MSG_NOSIGNAL);
    if (n <= 0) return false;
    off += static_cast<size_t>(n);
  }
  return true;
}

const char* reason_phrase(int status) {
  switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 429: return "Too Many Requests";
    case 500: return "Internal Server Error";
    case 503: return "Service Unavailable";
    default: return "Status";
  }
}

}  // namespace

FakeHttpResponse FakeHttpResponse::json(int status, std::string body) {
  FakeHttpResponse r;
  r.status = status;
  r.headers = {{"Content-Type", "application/json"}};
  r.body = std::move(body);
  return r;
}

FakeHttpResponse FakeHttpResponse::never() {
  FakeHttpResponse r;
  r.hang = true;
  return r;
}

std::string openai_reply(const std::string& text, int prompt_tokens, int completion_tokens) {
  nlohmann::json j = {{"id", "chatcmpl-test"}, {"object", "chat.completion"},
                      {"choices", {{{"index", 0}, {"message", {{"role", "assistant"}, {"content", text}}},
                                    {"finish_reason", "stop"}}}},
                      {"usage", {{"prompt_tokens", prompt_tokens}, {"completion_tokens", completion_tokens}}}};
  return j.dump();
}

std::string anthropic_reply(const std::string& text, int input_tokens, int output_tokens) {
  nlohmann::json j = {{"id", "msg_test"}, {"type", "message"}, {"role", "assistant"},
                      {"content", {{{"type", "text"}, {"text", text}}}}, {"stop_reason", "end_turn"},
                      {"usage", {{"input_tokens", input_tokens}, {"output_tokens", output_tokens}}}};
  return j.dump();
}

std::string kernel_reply(const std::string& source, const std::string& params_json, const std::string& lang) {
  std::string text = "Here is a faster variant.\n\n```" + lang + "\n" + source;
  if (!source.empty() && source.back() != '\n') text += "\n";
  text += "```\n";
  if (!params_json.empty()) text += "```json\n{\"params\": " + params_json + ", \"note\": \"scripted\"}\n```\n";
  return text;
}

FakeLlmServer::FakeLlmServer(Responder responder) : responder_(std::move(responder)) {
  if (pipe(wake_) != 0) return;
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return;
  const int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || ::listen(fd, 64) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    ::close(fd);
    return;
  }
  listen_fd_ = fd;
  port_ = ntohs(addr.sin_port);
  acceptor_ = std::thread([this] { accept_loop(); });
}

FakeLlmServer::~FakeLlmServer() {
  stopping_.store(true);
  if (wake_[1] >= 0) ::close(wake_[1]);
  if (acceptor_.joinable()) acceptor_.join();
  std::vector<std::thread> threads;
  {
    std::lock_guard<std::mutex> lock(mu_);
    threads.swap(connections_);
  }
  for (std::thread& t : threads) t.join();
  if (listen_fd_ >= 0) ::close(listen_fd_);
  if (wake_[0] >= 0) ::close(wake_[0]);
}

std::string FakeLlmServer::url() const { return "http://127.0.0.1:" + std::to_string(port_); }

void FakeLlmServer::push(FakeHttpResponse response) {
  std::lock_guard<std::mutex> lock(mu_);
  script_.push_back(std::move(response));
}

std::vector<FakeHttpRequest> FakeLlmServer::requests() const {
  std::lock_guard<std::mutex> lock(mu_);
  return requests_;
}

size_t FakeLlmServer::request_count() const {
  std::lock_guard<std::mutex> lock(mu_);
  return requests_.size();
}

bool FakeLlmServer::wait_for_requests(size_t n, int timeout_ms) const {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms), [&] { return requests_.size() >= n; });
}

void FakeLlmServer::accept_loop() {
  while (!stopping_.load()) {
    if (!wait_readable(listen_fd_, wake_[0])) return;
    const int fd = ::accept(listen_fd_, nullptr, nullptr);
    if (fd < 0) continue;
    std::lock_guard<std::mutex> lock(mu_);
    connections_.emplace_back([this, fd] { serve(fd); });
  }
}

void FakeLlmServer::serve(int fd) {
  FakeHttpRequest req;
  std::string data;
  size_t header_end = std::string::npos;
  size_t content_length = 0;
  char buf[65536];
  for (;;) {
    if (header_end != std::string::npos && data.size() >= header_end + 4 + content_length) break;
    if (!wait_readable(fd, wake_[0])) {
      ::close(fd);
      return;
    }
    const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) {
      ::close(fd);
      return;
    }
    data.append(buf, static_cast<size_t>(n));
    if (header_end == std::string::npos && (header_end = data.find("\r\n\r\n")) != std::string::npos) {
      size_t pos = data.find("\r\n");
      const std::string first = data.substr(0, pos);
      const size_t sp1 = first.find(' '), sp2 = first.find(' ', sp1 + 1);
      req.method = first.substr(0, sp1);
      req.path = first.substr(sp1 + 1, sp2 - sp1 - 1);
      while (pos < header_end) {
        const size_t next = data.find("\r\n", pos + 2);
        const std::string line = data.substr(pos + 2, next - pos - 2);
        const size_t colon = line.find(':');
        if (colon != std::string::npos) {
          std::string name = line.substr(0, colon);
          std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
          std::string value = line.substr(colon + 1);
          value.erase(0, value.find_first_not_of(' '));
          req.headers[name] = value;
        }
        pos = next;
      }
      if (auto it = req.headers.find("content-length"); it != req.headers.end()) {
        content_length = std::stoul(it->second);
      }
    }
  }
  req.body = data.substr(header_end + 4, content_length);
  FakeHttpResponse resp;
  bool scripted = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    requests_.push_back(req);
    if (!script_.empty()) {
      resp = std::move(script_.front());
      script_.pop_front();
      scripted = true;
    }
  }
  cv_.notify_all();
  if (!scripted) resp = responder_ ? responder_(req) : FakeHttpResponse::json(500, R"({"error":{"message":"no script"}})");
  if (resp.hang) {
    wait_readable(-1, wake_[0]);  // poll ignores fd -1: returns when the server stops
    ::close(fd);
    return;
  }
  std::string out = "HTTP/1.1 " + std::to_string(resp.status) + " " + reason_phrase(resp.status) + "\r\n";
  for (const auto& [k, v] : resp.headers) out += k + ": " + v + "\r\n";
  out += "Content-Length: " + std::to_string(resp.body.size()) + "\r\nConnection: close\r\n\r\n";
  out += resp.body;
  write_all(fd, out);
  ::close(fd);
}

}  // namespace kiln::testing
