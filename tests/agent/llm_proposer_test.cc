// The LLM proposer against a scripted fake provider, on the real rmsnorm target (cpu backend):
// rewrites, refusals asked again with the reason, duplicates, repairs from a failed child's log
// (and their limit), credit for kept children, the token budget, a model that never answers; and
// the model bandit's choices.
#include "agent/llm/llm_proposer.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "agent/llm/prompt.h"
#include "tests/support/fake_llm_server.h"
#include "tests/support/test_env.h"

namespace kiln::agent::llm {
namespace {

using testing::FakeHttpResponse;
using testing::FakeLlmServer;

const char* kFaster =
    "extern \"C\" void rmsnorm(const T* x, const T* w, T* y, int64_t M, int64_t N, float eps) { /* v1 */ y[0] = x[0]; }\n";
const char* kBroken = "extern \"C\" void rmsnorm(const T* x, const T* w, T* y, int64_t M, int64_t N, float eps) { oops }\n";
const char* kFixed =
    "extern \"C\" void rmsnorm(const T* x, const T* w, T* y, int64_t M, int64_t N, float eps) { y[1] = x[1]; }\n";

LlmConfig config_for(const FakeLlmServer& server) {
  LlmConfig c;
  ModelConfig m;
  m.name = "scripted";
  m.endpoint = server.url() + "/v1";
  m.model = "scripted-model";
  m.price_in_per_mtok_usd = 1;
  m.price_out_per_mtok_usd = 1;
  c.models.push_back(m);
  c.concurrency = 1;
  c.call_deadline_s = 5;
  c.task_deadline_s = 10;
  c.retries = 1;
  c.backoff_initial_ms = 10;
  c.backoff_max_ms = 20;
  return c;
}

FakeHttpResponse reply(const std::string& source, const std::string& params = "{\"UNROLL\": 8}") {
  return FakeHttpResponse::json(200, testing::openai_reply(testing::kernel_reply(source, params)));
}

class LlmProposerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Result<TargetSpec> s = testing::load_builtin_target("rmsnorm");
    ASSERT_TRUE(s.is_ok()) << s.status().to_string();
    template_source_ = s->backend("cpu")->tunable->source;
  }
  proto::ProposeTask task(const std::string& id, const std::string& parent_source = "",
                          const std::map<std::string, std::string>& params = {{"UNROLL", "4"}}) {
    proto::ProposeTask t;
    t.task_id = id;
    t.target = "rmsnorm";
    t.arch = "cpu/test";
    t.backend = "cpu";
    t.parents.push_back({"parent-" + id, parent_source.empty() ? template_source_ : parent_source, params, 100,
                         {}, ""});
    return t;
  }
  proto::Proposal ask(LlmProposer& p, const proto::ProposeTask& t) {
    return p.answer(t, Clock::now(), cancel_);
  }
  std::string targets_ = testing::builtin_targets_dir();
  std::string template_source_;
  std::atomic<bool> cancel_{false};
};

TEST_F(LlmProposerTest, AGoodReplyBecomesARewriteCandidate) {
  FakeLlmServer server;
  server.push(reply(kFaster));
  LlmProposer p(config_for(server), targets_, 1);
  proto::Proposal out = ask(p, task("t1"));
  ASSERT_TRUE(out.error.empty()) << out.error;
  ASSERT_EQ(out.candidates.size(), 1u);
  EXPECT_EQ(out.candidates[0].source, kFaster);
  EXPECT_EQ(out.candidates[0].params.at("UNROLL"), "8");
  EXPECT_EQ(out.candidates[0].operator_name, "llm rewrite");
  EXPECT_EQ(out.candidates[0].parent_id, "parent-t1");
  EXPECT_NE(out.candidates[0].note.find("scripted"), std::string::npos);
  // The prompt held the parent's source.
  ASSERT_EQ(server.request_count(), 1u);
  EXPECT_NE(server.requests()[0].body.find("UNROLL independent partial sums"), std::string::npos);
  nlohmann::json st = p.stats();
  EXPECT_EQ(st["models"][0]["proposals"], 1);
  EXPECT_EQ(st["tokens"], 150);
}

TEST_F(LlmProposerTest, ARefusedReplyIsAskedAgainWithTheReasonAndCounted) {
  FakeLlmServer server;
  server.push(FakeHttpResponse::json(200, testing::openai_reply("I think unrolling would help.")));
  server.push(reply(kFaster));
  LlmProposer p(config_for(server), targets_, 1);
  proto::Proposal out = ask(p, task("t1"));
  ASSERT_EQ(out.candidates.size(), 1u) << out.error;
  ASSERT_EQ(server.request_count(), 2u);
  EXPECT_NE(server.requests()[1].body.find("previous answer was refused: no fenced code block"), std::string::npos);
  nlohmann::json st = p.stats();
  EXPECT_EQ(st["models"][0]["rejected"], 1);
  EXPECT_EQ(st["rejections"]["no fenced code block in the reply"], 1);

  // Every ask refused: the task fails with the last reason.
  server.push(FakeHttpResponse::json(200, testing::openai_reply("no code")));
  server.push(FakeHttpResponse::json(200, "{malformed"));
  out = ask(p, task("t2"));
  EXPECT_TRUE(out.candidates.empty());
  EXPECT_NE(out.error.find("not a JSON object"), std::string::npos) << out.error;
}

TEST_F(LlmProposerTest, TheParentOrAnEarlierProposalUpToWhitespaceIsADuplicate) {
  FakeLlmServer server;
  std::string respaced = "// a new comment\n" + template_source_ + "\n\n";
  server.push(reply(respaced, "{\"UNROLL\": 4}"));  // the parent itself, restyled
  server.push(reply(kFaster));
  server.push(reply(std::string(kFaster) + "   // same again\n"));
  server.push(reply(std::string(kFaster) + "\n"));
  LlmProposer p(config_for(server), targets_, 1);
  proto::Proposal out = ask(p, task("t1"));
  ASSERT_EQ(out.candidates.size(), 1u) << out.error;
  EXPECT_EQ(out.candidates[0].source, kFaster);
  out = ask(p, task("t2"));
  EXPECT_TRUE(out.candidates.empty());
  EXPECT_NE(out.error.find("the same kernel"), std::string::npos) << out.error;
  nlohmann::json st = p.stats();
  EXPECT_EQ(st["models"][0]["duplicates"], 3);
  EXPECT_EQ(st["models"][0]["proposals"], 1);
}

TEST_F(LlmProposerTest, AFailedChildGoesBackWithItsLogAndRepairsAreLimited) {
  FakeLlmServer server;
  server.push(reply(kBroken));
  LlmConfig config = config_for(server);
  config.repair_tries = 1;
  LlmProposer p(config, targets_, 1);
  proto::Proposal first = ask(p, task("t1"));
  ASSERT_EQ(first.candidates.size(), 1u) << first.error;

  // The coordinator reports the child as failed to compile: the next task repairs it.
  proto::ProposeTask t2 = task("t2");
  t2.failed_children.push_back({"cand-broken", "parent-t1", kBroken, {{"UNROLL", "8"}}, "compile_error",
                                "kernel.cpp:1:80: error: 'oops' was not declared in this scope"});
  server.push(reply(kFixed));
  proto::Proposal repaired = ask(p, t2);
  ASSERT_EQ(repaired.candidates.size(), 1u) << repaired.error;
  EXPECT_EQ(repaired.candidates[0].operator_name, "llm repair");
  EXPECT_EQ(repaired.candidates[0].source, kFixed);
  ASSERT_EQ(server.request_count(), 2u);
  const std::string prompt = server.requests()[1].body;
  EXPECT_NE(prompt.find("Repair"), std::string::npos);
  EXPECT_NE(prompt.find("'oops' was not declared"), std::string::npos);
  EXPECT_NE(prompt.find("{ oops }"), std::string::npos);

  // The same failure again is not repaired twice, and the repair's own failure is past the limit:
  // both tasks ask for rewrites instead; the failure stays in the prompt's summary.
  proto::ProposeTask t3 = task("t3");
  t3.failed_children.push_back(t2.failed_children[0]);
  t3.failed_children.push_back({"cand-fixed", "parent-t1", kFixed, {{"UNROLL", "8"}}, "wrong_answer",
                                "smoke: mismatch at index 3"});
  server.push(reply(kFaster));
  proto::Proposal third = ask(p, t3);
  ASSERT_EQ(third.candidates.size(), 1u) << third.error;
  EXPECT_EQ(third.candidates[0].operator_name, "llm rewrite");
  EXPECT_NE(server.requests()[2].body.find("wrong_answer: smoke: mismatch at index 3"), std::string::npos);
  nlohmann::json st = p.stats();
  EXPECT_EQ(st["models"][0]["repairs"], 1);
  EXPECT_EQ(st["models"][0]["failed"], 2);
}

TEST_F(LlmProposerTest, AProposalThatComesBackAsAParentIsCreditedAsAccepted) {
  FakeLlmServer server;
  server.push(reply(kFaster));
  LlmProposer p(config_for(server), targets_, 1);
  ASSERT_EQ(ask(p, task("t1")).candidates.size(), 1u);
  server.push(reply(kFixed));
  proto::Proposal next = ask(p, task("t2", std::string(kFaster) + "\n", {{"UNROLL", "8"}}));
  ASSERT_EQ(next.candidates.size(), 1u) << next.error;
  EXPECT_EQ(p.stats()["models"][0]["accepted"], 1);
}

// After one reply of 150 tokens at $1 per million each way ($0.00015), a budget of 100 tokens or
// of $0.0001 is spent: the next task is answered with why, and no model is asked again.
TEST_F(LlmProposerTest, OnceTheTokenOrCostBudgetIsSpentNoModelIsAsked) {
  for (const bool by_cost : {false, true}) {
    SCOPED_TRACE(by_cost ? "cost budget" : "token budget");
    FakeLlmServer server;
    server.push(reply(kFaster));
    LlmConfig config = config_for(server);
    if (by_cost) {
      config.budget_usd = 1e-4;
    } else {
      config.budget_tokens = 100;
    }
    LlmProposer p(config, targets_, 1);
    ASSERT_EQ(ask(p, task("t1")).candidates.size(), 1u);
    proto::Proposal out = ask(p, task("t2"));
    EXPECT_TRUE(out.candidates.empty());
    EXPECT_NE(out.error.find("budget is spent"), std::string::npos) << out.error;
    EXPECT_EQ(server.request_count(), 1u);
    EXPECT_TRUE(p.stats()["budget_spent"].get<bool>());
    EXPECT_NEAR(p.stats()["cost_usd"].get<double>(), 1.5e-4, 1e-9);
  }
}

TEST_F(LlmProposerTest, AModelThatNeverAnswersFailsTheTaskAtItsDeadline) {
  FakeLlmServer server([](const testing::FakeHttpRequest&) { return FakeHttpResponse::never(); });
  LlmConfig config = config_for(server);
  config.task_deadline_s = 1;
  LlmProposer p(config, targets_, 1);
  const auto start = Clock::now();
  proto::Proposal out = ask(p, task("t1"));
  EXPECT_TRUE(out.candidates.empty());
  EXPECT_NE(out.error.find("model call failed"), std::string::npos) << out.error;
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(4));
  EXPECT_EQ(p.stats()["models"][0]["call_errors"], 1);
}

TEST_F(LlmProposerTest, UnknownTargetsAndMissingParentsAreAnsweredWithAnError) {
  FakeLlmServer server;
  LlmProposer p(config_for(server), targets_, 1);
  proto::ProposeTask t = task("t1");
  t.target = "no_such_target";
  EXPECT_FALSE(ask(p, t).error.empty());
  t = task("t2");
  t.parents.clear();
  EXPECT_EQ(ask(p, t).error, "the task names no parent to propose from");
  EXPECT_EQ(server.request_count(), 0u);
}

TEST(ModelBandit, TriesEveryModelFirstThenPrefersAcceptedImprovementsPerDollar) {
  ModelBandit b({"cheap", "dear"}, 1e-4, 7);
  EXPECT_EQ(b.pick(), 0u);
  b.update(0, [](ModelStats& s) { s.proposals = 1; });
  EXPECT_EQ(b.pick(), 1u);
  // Same acceptance rate; "dear" costs 100x more per proposal.
  b.update(0, [](ModelStats& s) { s.proposals = 20; s.accepted = 5; s.cost_usd = 0.2; });
  b.update(1, [](ModelStats& s) { s.proposals = 20; s.accepted = 5; s.cost_usd = 20; });
  int cheap = 0;
  for (int i = 0; i < 200; ++i) cheap += b.pick() == 0;
  EXPECT_GT(cheap, 190);
  // Same cost; "dear" is accepted far more often.
  ModelBandit c({"poor", "good"}, 1e-4, 7);
  c.update(0, [](ModelStats& s) { s.proposals = 20; s.accepted = 0; s.cost_usd = 1; });
  c.update(1, [](ModelStats& s) { s.proposals = 20; s.accepted = 10; s.cost_usd = 1; });
  int good = 0;
  for (int i = 0; i < 200; ++i) good += c.pick() == 1;
  EXPECT_GT(good, 190);
  nlohmann::json j = c.to_json();
  EXPECT_EQ(j["models"][1]["name"], "good");
  EXPECT_DOUBLE_EQ(j["models"][1]["accepted_per_usd"].get<double>(), 10.0);
}

}  // namespace
}  // namespace kiln::agent::llm
