// LLM client: see llm_client.h. One curl easy handle per HTTP call (calls run on several threads;
// easy handles are not shared). curl_global_init is thread-safe in the libcurl this builds with
// (>= 7.84) and reference-counted, so each call brackets itself without a process-wide setup.
#include "agent/llm/llm_client.h"

#include <curl/curl.h>

#include <algorithm>
#include <cctype>
#include <thread>

#include <nlohmann/json.hpp>

namespace kiln::agent::llm {
namespace {

struct Sink {
  std::string body;
  uint64_t max_bytes = 0;
  bool overflow = false;
  int64_t retry_after_s = -1;
  const std::atomic<bool>* cancel = nullptr;
};

int on_progress(void* user, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  auto* sink = static_cast<Sink*>(user);
  return sink->cancel && sink->cancel->load() ? 1 : 0;  // non-zero aborts the transfer
}

size_t on_body(char* data, size_t size, size_t count, void* user) {
  auto* sink = static_cast<Sink*>(user);
  const size_t n = size * count;
  if (sink->body.size() + n > sink->max_bytes) {
    sink->overflow = true;
    return 0;  // curl stops with CURLE_WRITE_ERROR
  }
  sink->body.append(data, n);
  return n;
}

size_t on_header(char* data, size_t size, size_t count, void* user) {
  auto* sink = static_cast<Sink*>(user);
  const size_t n = size * count;
  std::string line(data, n);
  std::string lower = line;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  if (lower.rfind("retry-after:", 0) == 0) {
    std::string v = line.substr(12);
    v.erase(0, v.find_first_not_of(" \t"));
    int64_t s = 0;
    size_t digits = 0;
    while (digits < v.size() && std::isdigit(static_cast<unsigned char>(v[digits])) && digits < 9) {
      s = s * 10 + (v[digits++] - '0');
    }
    if (digits > 0) sink->retry_after_s = s;  // an HTTP date is ignored: back-off applies
  }
  return n;
}

// At most `n` printable bytes of untrusted text, for error messages.
std::string excerpt(const std::string& text, size_t n = 300) {
  std::string out;
  for (size_t i = 0; i < text.size() && out.size() < n; ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    out += (c >= 0x20 && c < 0x7f) ? static_cast<char>(c) : ' ';
  }
  if (text.size() > n) out += "...";
  return out;
}

// The provider's error message from an error body, or an excerpt of the body.
std::string error_text(const std::string& body) {
  nlohmann::json j = nlohmann::json::parse(body, nullptr, false);
  if (j.is_object() && j.contains("error")) {
    const auto& e = j["error"];
    if (e.is_object() && e.contains("message") && e["message"].is_string()) return excerpt(e["message"].get<std::string>());
    if (e.is_string()) return excerpt(e.get<std::string>());
  }
  return excerpt(body);
}

bool retryable(long status) { return status == 429 || status == 408 || status >= 500; }

uint64_t token_count(const nlohmann::json& usage, const char* key) {
  if (!usage.is_object() || !usage.contains(key)) return 0;
  const auto& v = usage[key];
  return v.is_number_unsigned() || (v.is_number_integer() && v.get<int64_t>() >= 0) ? v.get<uint64_t>() : 0;
}

}  // namespace

Result<HttpReply> http_post(const std::string& url, const std::map<std::string, std::string>& headers,
                            const std::string& body, int64_t timeout_ms, uint64_t max_bytes,
                            const std::atomic<bool>* cancel) {
  if (timeout_ms <= 0) return deadline_exceeded("no time left for the call");
  if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) return internal_error("curl_global_init failed");
  CURL* curl = curl_easy_init();
  if (!curl) {
    curl_global_cleanup();
    return internal_error("curl_easy_init failed");
  }
  Sink sink;
  sink.max_bytes = max_bytes;
  sink.cancel = cancel;
  curl_slist* list = nullptr;
  for (const auto& [k, v] : headers) list = curl_slist_append(list, (k + ": " + v).c_str());
  list = curl_slist_append(list, "Expect:");  // no 100-continue round trip on large prompts
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_POST, 1L);
  curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body.data());
  curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, list);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &sink);
  curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(curl, CURLOPT_HEADERDATA, &sink);
  curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, static_cast<long>(timeout_ms));
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(std::min<int64_t>(timeout_ms, 10000)));
  curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, on_progress);
  curl_easy_setopt(curl, CURLOPT_XFERINFODATA, &sink);
  curl_easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);  // threads: no SIGALRM for DNS timeouts
  curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
  const CURLcode rc = curl_easy_perform(curl);
  long status = 0;
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
  curl_slist_free_all(list);
  curl_easy_cleanup(curl);
  curl_global_cleanup();
  if (rc == CURLE_ABORTED_BY_CALLBACK) return Status(StatusCode::kCancelled, "stopped");
  if (sink.overflow) return out_of_range("reply larger than " + std::to_string(max_bytes) + " bytes");
  if (rc == CURLE_OPERATION_TIMEDOUT) {
    return deadline_exceeded("no reply within " + std::to_string(timeout_ms) + " ms");
  }
  if (rc != CURLE_OK) return unavailable(std::string("HTTP call failed: ") + curl_easy_strerror(rc));
  return HttpReply{status, std::move(sink.body), sink.retry_after_s};
}

std::string request_body(const ModelConfig& model, const ChatRequest& request) {
  nlohmann::json j;
  j["model"] = model.model;
  j["max_tokens"] = model.max_tokens;
  j["temperature"] = model.temperature;
  if (model.api == Api::kAnthropic) {
    j["system"] = request.system;
    j["messages"] = nlohmann::json::array({{{"role", "user"}, {"content", request.user}}});
  } else {
    j["messages"] = nlohmann::json::array({{{"role", "system"}, {"content", request.system}},
                                           {{"role", "user"}, {"content", request.user}}});
  }
  // Replies may quote arbitrary bytes back; the prompt holds sources that are not always UTF-8.
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

Result<ChatReply> parse_reply_body(Api api, const std::string& body) {
  nlohmann::json j = nlohmann::json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    return invalid_argument("the reply is not a JSON object: " + excerpt(body, 120));
  }
  ChatReply r;
  if (api == Api::kAnthropic) {
    if (!j.contains("content") || !j["content"].is_array()) {
      return invalid_argument("the reply has no 'content' array");
    }
    for (const auto& block : j["content"]) {
      if (block.is_object() && block.value("type", "") == "text" && block.contains("text") &&
          block["text"].is_string()) {
        r.text += block["text"].get<std::string>();
      }
    }
    if (j.contains("stop_reason") && j["stop_reason"].is_string()) r.stop_reason = j["stop_reason"];
    if (j.contains("usage")) {
      r.input_tokens = token_count(j["usage"], "input_tokens");
      r.output_tokens = token_count(j["usage"], "output_tokens");
    }
  } else {
    if (!j.contains("choices") || !j["choices"].is_array() || j["choices"].empty() ||
        !j["choices"][0].is_object()) {
      return invalid_argument("the reply has no 'choices'");
    }
    const auto& choice = j["choices"][0];
    if (!choice.contains("message") || !choice["message"].is_object()) {
      return invalid_argument("the reply's first choice has no 'message'");
    }
    const auto& msg = choice["message"];
    if (msg.contains("content") && msg["content"].is_string()) r.text = msg["content"].get<std::string>();
    if (choice.contains("finish_reason") && choice["finish_reason"].is_string()) {
      r.stop_reason = choice["finish_reason"];
    }
    if (j.contains("usage")) {
      r.input_tokens = token_count(j["usage"], "prompt_tokens");
      r.output_tokens = token_count(j["usage"], "completion_tokens");
    }
  }
  return r;
}

LlmClient::LlmClient(const LlmConfig& config) : config_(config) {}

Result<ChatReply> LlmClient::complete(const ModelConfig& model, const ChatRequest& request,
                                      Clock::time_point deadline, const std::atomic<bool>* cancel) const {
  KILN_ASSIGN_OR_RETURN(std::string key, api_key(model));
  std::map<std::string, std::string> headers{{"Content-Type", "application/json"}};
  if (model.api == Api::kAnthropic) {
    headers["anthropic-version"] = "2023-06-01";
    if (!key.empty()) headers["x-api-key"] = key;
  } else if (!key.empty()) {
    headers["Authorization"] = "Bearer " + key;
  }
  const std::string url = model.request_url();
  const std::string body = request_body(model, request);
  auto left_ms = [&] {
    return std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  };
  auto cancelled = [&] { return cancel && cancel->load(); };
  int64_t backoff_ms = config_.backoff_initial_ms;
  std::string last;
  for (uint32_t attempt = 1; attempt <= config_.retries + 1; ++attempt) {
    if (cancelled()) return Status(StatusCode::kCancelled, "stopped");
    const int64_t timeout_ms = std::min<int64_t>(left_ms(), int64_t{config_.call_deadline_s} * 1000);
    if (timeout_ms <= 0) {
      return deadline_exceeded(model.name + ": deadline passed" + (last.empty() ? "" : " after " + last));
    }
    Result<HttpReply> http = http_post(url, headers, body, timeout_ms, config_.max_reply_bytes, cancel);
    int64_t wait_ms = backoff_ms;  // Retry-After replaces it (not capped: the server knows best)
    if (http.is_ok() && http->status == 200) {
      Result<ChatReply> r = parse_reply_body(model.api, http->body);
      if (!r.is_ok()) return r.status().with_context(model.name);
      r->attempts = attempt;
      r->cost_usd = model.cost_usd(r->input_tokens, r->output_tokens);
      return r;
    }
    if (http.is_ok()) {
      last = "HTTP " + std::to_string(http->status) + ": " + error_text(http->body);
      if (!retryable(http->status)) return invalid_argument(model.name + ": " + last);
      if (http->retry_after_s >= 0) wait_ms = http->retry_after_s * 1000;
    } else {
      const StatusCode code = http.status().code();
      if (code == StatusCode::kOutOfRange || code == StatusCode::kInternal || code == StatusCode::kCancelled) {
        return http.status().with_context(model.name);
      }
      last = http.status().message();
      if (code == StatusCode::kDeadlineExceeded && left_ms() <= 0) {
        return deadline_exceeded(model.name + ": " + last);
      }
    }
    if (attempt == config_.retries + 1) break;
    if (wait_ms == backoff_ms) wait_ms = std::min<int64_t>(wait_ms, config_.backoff_max_ms);
    if (wait_ms >= left_ms()) {
      return deadline_exceeded(model.name + ": " + last + "; the next try would pass the deadline");
    }
    const auto until = Clock::now() + std::chrono::milliseconds(wait_ms);
    while (Clock::now() < until) {
      if (cancelled()) return Status(StatusCode::kCancelled, "stopped");
      std::this_thread::sleep_for(std::min<Clock::duration>(until - Clock::now(), std::chrono::milliseconds(50)));
    }
    backoff_ms = std::min<int64_t>(backoff_ms * 2, config_.backoff_max_ms);
  }
  return unavailable(model.name + ": " + std::to_string(config_.retries + 1) + " tries failed; last: " + last);
}

}  // namespace kiln::agent::llm
