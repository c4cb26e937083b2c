// One chat completion from a model over HTTP (libcurl): the OpenAI-compatible chat completions
// API (OpenAI, vLLM, llama.cpp server, Ollama) or Anthropic Messages. The client owns the call's
// policy: a hard deadline per HTTP call and one for all tries, retries with exponential back-off
// on 429, 408, 5xx and transport failures (a Retry-After header in seconds wins, capped by the
// deadline), a cap on the reply's size, and validation of the reply's JSON. The API key is put
// in a header and nowhere else: it never appears in errors or logs.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <string>

#include "agent/llm/llm_config.h"
#include "shared/status.h"

namespace kiln::agent::llm {

using Clock = std::chrono::steady_clock;

struct HttpReply {
  long status = 0;
  std::string body;
  int64_t retry_after_s = -1;  // from a Retry-After header in seconds; -1 when absent
};

// POSTs `body` to `url`. Fails (kDeadlineExceeded) when `timeout_ms` passes, (kOutOfRange) when the
// body exceeds `max_bytes`, (kCancelled) soon after `cancel` becomes true, (kUnavailable) on
// connection failures. Any HTTP status is a value.
Result<HttpReply> http_post(const std::string& url, const std::map<std::string, std::string>& headers,
                            const std::string& body, int64_t timeout_ms, uint64_t max_bytes,
                            const std::atomic<bool>* cancel = nullptr);

struct ChatRequest {
  std::string system;
  std::string user;
};

struct ChatReply {
  std::string text;
  uint64_t input_tokens = 0;
  uint64_t output_tokens = 0;
  double cost_usd = 0;
  uint32_t attempts = 0;     // HTTP calls made (1 + retries used)
  std::string stop_reason;   // "stop", "length", "end_turn", "max_tokens", ...
};

// The wire bodies, exposed for tests.
std::string request_body(const ModelConfig& model, const ChatRequest& request);
// Extracts text and usage from a 200 reply; kInvalidArgument naming what is wrong.
Result<ChatReply> parse_reply_body(Api api, const std::string& body);

class LlmClient {
 public:
  // `config` supplies the deadlines, retries, back-off and reply cap; it must outlive the client.
  explicit LlmClient(const LlmConfig& config);

  // Asks `model` once (with retries). Stops early with kCancelled when `cancel` becomes true
  // (during a call and its back-off), and never runs past `deadline`.
  // Errors: kDeadlineExceeded, kUnavailable (retries used up), kInvalidArgument (a 4xx or a reply
  // that is not the API's JSON), kOutOfRange (reply too large), kFailedPrecondition (no key).
  Result<ChatReply> complete(const ModelConfig& model, const ChatRequest& request, Clock::time_point deadline,
                             const std::atomic<bool>* cancel = nullptr) const;

 private:
  const LlmConfig& config_;
};

}  // namespace kiln::agent::llm
