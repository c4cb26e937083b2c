// The LLM client against a local fake provider (tests/support/fake_llm_server.h): both wire
// formats, the key only in its header, retries on 429 (honouring Retry-After) and 5xx, no retry on
// 4xx or malformed JSON, the hard deadline on a call that never answers, the reply size cap,
// cancellation; and the strict config reader.
#include "agent/llm/llm_client.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <nlohmann/json.hpp>
#include <thread>

#include "tests/support/fake_llm_server.h"

namespace kiln::agent::llm {
namespace {

using testing::FakeHttpResponse;
using testing::FakeLlmServer;

LlmConfig fast_config() {
  LlmConfig c;
  c.call_deadline_s = 5;
  c.retries = 3;
  c.backoff_initial_ms = 10;
  c.backoff_max_ms = 40;
  c.max_reply_bytes = 1 << 20;
  return c;
}

ModelConfig model(const FakeLlmServer& server, Api api = Api::kOpenAi) {
  ModelConfig m;
  m.name = "fake";
  m.api = api;
  m.endpoint = server.url() + "/v1";
  m.model = "fake-model";
  m.price_in_per_mtok_usd = 2;
  m.price_out_per_mtok_usd = 10;
  return m;
}

Clock::time_point in_seconds(int s) { return Clock::now() + std::chrono::seconds(s); }

TEST(LlmClient, OpenAiReplyGivesTextTokensAndCostAndSendsTheKeyOnlyInItsHeader) {
  FakeLlmServer server;
  ASSERT_TRUE(server.started());
  server.push(FakeHttpResponse::json(200, testing::openai_reply("hello", 1000, 500)));
  setenv("KILN_TEST_LLM_KEY", "sk-secret-123", 1);
  ModelConfig m = model(server);
  m.api_key_env = "KILN_TEST_LLM_KEY";
  LlmConfig config = fast_config();
  Result<ChatReply> r = LlmClient(config).complete(m, {"be brief", "say hello"}, in_seconds(10));
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ(r->text, "hello");
  EXPECT_EQ(r->input_tokens, 1000u);
  EXPECT_EQ(r->output_tokens, 500u);
  EXPECT_DOUBLE_EQ(r->cost_usd, (1000 * 2.0 + 500 * 10.0) / 1e6);
  EXPECT_EQ(r->attempts, 1u);
  auto reqs = server.requests();
  ASSERT_EQ(reqs.size(), 1u);
  EXPECT_EQ(reqs[0].path, "/v1/chat/completions");
  EXPECT_EQ(reqs[0].headers["authorization"], "Bearer sk-secret-123");
  EXPECT_EQ(reqs[0].body.find("sk-secret-123"), std::string::npos);
  nlohmann::json body = nlohmann::json::parse(reqs[0].body);
  EXPECT_EQ(body["model"], "fake-model");
  EXPECT_EQ(body["messages"][0]["role"], "system");
  EXPECT_EQ(body["messages"][1]["content"], "say hello");
  unsetenv("KILN_TEST_LLM_KEY");
}

TEST(LlmClient, AnthropicReplyUsesMessagesRouteAndHeaders) {
  FakeLlmServer server;
  server.push(FakeHttpResponse::json(200, testing::anthropic_reply("bonjour", 10, 20)));
  setenv("KILN_TEST_ANTHROPIC_KEY", "ak-1", 1);
  ModelConfig m = model(server, Api::kAnthropic);
  m.endpoint = server.url();
  m.api_key_env = "KILN_TEST_ANTHROPIC_KEY";
  LlmConfig config = fast_config();
  Result<ChatReply> r = LlmClient(config).complete(m, {"sys", "user"}, in_seconds(10));
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ(r->text, "bonjour");
  EXPECT_EQ(r->stop_reason, "end_turn");
  EXPECT_EQ(r->output_tokens, 20u);
  auto reqs = server.requests();
  ASSERT_EQ(reqs.size(), 1u);
  EXPECT_EQ(reqs[0].path, "/v1/messages");
  EXPECT_EQ(reqs[0].headers["x-api-key"], "ak-1");
  EXPECT_EQ(reqs[0].headers["anthropic-version"], "2023-06-01");
  EXPECT_EQ(reqs[0].headers.count("authorization"), 0u);
  nlohmann::json body = nlohmann::json::parse(reqs[0].body);
  EXPECT_EQ(body["system"], "sys");
  EXPECT_EQ(body["messages"].size(), 1u);
  unsetenv("KILN_TEST_ANTHROPIC_KEY");
}

TEST(LlmClient, MissingKeyIsRefusedNamingTheVariable) {
  FakeLlmServer server;
  ModelConfig m = model(server);
  m.api_key_env = "KILN_TEST_UNSET_KEY_VARIABLE";
  unsetenv("KILN_TEST_UNSET_KEY_VARIABLE");
  LlmConfig config = fast_config();
  Result<ChatReply> r = LlmClient(config).complete(m, {"s", "u"}, in_seconds(5));
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(r.status().message().find("KILN_TEST_UNSET_KEY_VARIABLE"), std::string::npos);
  EXPECT_EQ(server.request_count(), 0u);
}

TEST(LlmClient, MalformedJsonIsRefusedWithoutRetry) {
  FakeLlmServer server;
  server.push(FakeHttpResponse::json(200, "{\"choices\": [ {\"message\": "));
  LlmConfig config = fast_config();
  Result<ChatReply> r = LlmClient(config).complete(model(server), {"s", "u"}, in_seconds(5));
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("not a JSON object"), std::string::npos) << r.status().message();
  EXPECT_EQ(server.request_count(), 1u);
  // Well-formed JSON of the wrong shape is refused too.
  server.push(FakeHttpResponse::json(200, R"({"choices": []})"));
  r = LlmClient(config).complete(model(server), {"s", "u"}, in_seconds(5));
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("no 'choices'"), std::string::npos) << r.status().message();
}

TEST(LlmClient, TooManyRequestsIsRetriedAfterTheServersRetryAfter) {
  FakeLlmServer server;
  FakeHttpResponse busy = FakeHttpResponse::json(429, R"({"error":{"message":"slow down"}})");
  busy.headers.push_back({"Retry-After", "1"});
  server.push(busy);
  server.push(FakeHttpResponse::json(200, testing::openai_reply("ok")));
  LlmConfig config = fast_config();  // back-off alone would wait 10 ms
  const auto start = Clock::now();
  Result<ChatReply> r = LlmClient(config).complete(model(server), {"s", "u"}, in_seconds(10));
  const auto waited = Clock::now() - start;
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ(r->attempts, 2u);
  EXPECT_GE(waited, std::chrono::milliseconds(950));
  EXPECT_EQ(server.request_count(), 2u);
}

TEST(LlmClient, RetryAfterBeyondTheDeadlineFailsAtOnce) {
  FakeLlmServer server;
  FakeHttpResponse busy = FakeHttpResponse::json(429, "{}");
  busy.headers.push_back({"Retry-After", "60"});
  server.push(busy);
  LlmConfig config = fast_config();
  const auto start = Clock::now();
  Result<ChatReply> r = LlmClient(config).complete(model(server), {"s", "u"}, in_seconds(5));
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(2));
}

TEST(LlmClient, ServerErrorsAreRetriedWithBackOffUntilTriesRunOut) {
  FakeLlmServer server;
  server.push(FakeHttpResponse::json(500, R"({"error":{"message":"boom"}})"));
  server.push(FakeHttpResponse::json(503, "overloaded"));
  server.push(FakeHttpResponse::json(200, testing::openai_reply("third time")));
  LlmConfig config = fast_config();
  Result<ChatReply> r = LlmClient(config).complete(model(server), {"s", "u"}, in_seconds(10));
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ(r->text, "third time");
  EXPECT_EQ(r->attempts, 3u);

  FakeLlmServer down([](const testing::FakeHttpRequest&) {
    return FakeHttpResponse::json(500, R"({"error":{"message":"still down"}})");
  });
  config.retries = 2;
  r = LlmClient(config).complete(model(down), {"s", "u"}, in_seconds(10));
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(r.status().message().find("still down"), std::string::npos) << r.status().message();
  EXPECT_EQ(down.request_count(), 3u);
}

TEST(LlmClient, ClientErrorsAreNotRetried) {
  FakeLlmServer server;
  server.push(FakeHttpResponse::json(400, R"({"error":{"message":"max_tokens too large"}})"));
  LlmConfig config = fast_config();
  Result<ChatReply> r = LlmClient(config).complete(model(server), {"s", "u"}, in_seconds(10));
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("HTTP 400: max_tokens too large"), std::string::npos) << r.status().message();
  EXPECT_EQ(server.request_count(), 1u);
}

TEST(LlmClient, ACallThatNeverAnswersEndsAtTheDeadline) {
  FakeLlmServer server([](const testing::FakeHttpRequest&) { return FakeHttpResponse::never(); });
  LlmConfig config = fast_config();
  config.call_deadline_s = 60;
  const auto start = Clock::now();
  Result<ChatReply> r = LlmClient(config).complete(model(server), {"s", "u"},
                                                   Clock::now() + std::chrono::milliseconds(700));
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::kDeadlineExceeded) << r.status().to_string();
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(3));
  EXPECT_GE(Clock::now() - start, std::chrono::milliseconds(600));
}

TEST(LlmClient, CancellingStopsAHangingCall) {
  FakeLlmServer server([](const testing::FakeHttpRequest&) { return FakeHttpResponse::never(); });
  LlmConfig config = fast_config();
  config.call_deadline_s = 60;
  std::atomic<bool> cancel{false};
  std::thread canceller([&] {
    server.wait_for_requests(1, 5000);
    cancel.store(true);
  });
  const auto start = Clock::now();
  Result<ChatReply> r = LlmClient(config).complete(model(server), {"s", "u"}, in_seconds(60), &cancel);
  canceller.join();
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::kCancelled) << r.status().to_string();
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(5));
}

TEST(LlmClient, AnEnormousReplyIsCutOff) {
  FakeLlmServer server;
  server.push(FakeHttpResponse::json(200, testing::openai_reply(std::string(3 << 20, 'x'))));
  LlmConfig config = fast_config();
  Result<ChatReply> r = LlmClient(config).complete(model(server), {"s", "u"}, in_seconds(10));
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::kOutOfRange);
  EXPECT_NE(r.status().message().find("larger than"), std::string::npos);
  EXPECT_EQ(server.request_count(), 1u);
}

TEST(LlmConfig, ReadsModelsAndLimitsAndRefusesUnknownKeysNamingTheField) {
  Result<LlmConfig> c = parse_llm_config(R"({
    "models": [{"api": "anthropic", "endpoint": "https://api.anthropic.com", "model": "claude-x",
                "api_key_env": "ANTHROPIC_API_KEY", "price_in_per_mtok_usd": 3},
               {"name": "local", "endpoint": "http://localhost:8000/v1", "model": "qwen"}],
    "concurrency": 3, "budget_usd": 2.5, "repair_tries": 1})",
                                         "llm.json");
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  ASSERT_EQ(c->models.size(), 2u);
  EXPECT_EQ(c->models[0].name, "claude-x");
  EXPECT_EQ(c->models[0].request_url(), "https://api.anthropic.com/v1/messages");
  EXPECT_EQ(c->models[1].request_url(), "http://localhost:8000/v1/chat/completions");
  EXPECT_EQ(c->concurrency, 3u);
  EXPECT_DOUBLE_EQ(c->budget_usd, 2.5);
  EXPECT_EQ(c->repair_tries, 1u);

  Result<LlmConfig> bad = parse_llm_config(
      R"({"models": [{"endpoint": "http://x", "model": "m", "temprature": 0.2}]})", "llm.json");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("temprature"), std::string::npos) << bad.status().message();
  bad = parse_llm_config(R"({"models": [{"api": "gemini", "endpoint": "http://x", "model": "m"}]})", "llm.json");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("models[0].api"), std::string::npos) << bad.status().message();
  bad = parse_llm_config(R"({"models": []})", "llm.json");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("models"), std::string::npos);
}

}  // namespace
}  // namespace kiln::agent::llm
