// Prompts and reply parsing of the LLM proposer on the real rmsnorm target: what a prompt tells
// the model, which replies become candidates and why the others are refused, and the normal form
// behind novelty.
#include "agent/llm/prompt.h"

#include <gtest/gtest.h>

namespace kiln::agent::llm {
namespace {

class LlmPromptTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Result<TargetSpec> s = load_target(std::string(KILN_SOURCE_DIR) + "/targets/rmsnorm");
    ASSERT_TRUE(s.is_ok()) << s.status().to_string();
    spec_ = std::move(s).value();
    cpu_ = &*spec_.backend("cpu")->tunable;
    cuda_ = &*spec_.backend("cuda")->tunable;
  }
  TargetSpec spec_;
  const KernelSpec* cpu_ = nullptr;
  const KernelSpec* cuda_ = nullptr;
};

const char* kKernel = "extern \"C\" void rmsnorm(const T* x, const T* w, T* y, int64_t M, int64_t N, float eps) {}\n";

TEST_F(LlmPromptTest, SignatureFollowsTheCallingConvention) {
  EXPECT_EQ(entry_signature(spec_, "cuda", "rmsnorm"),
            "extern \"C\" __global__ void rmsnorm(const T* x, const T* w, T* y, long long M, long long N, float eps)");
  EXPECT_EQ(entry_signature(spec_, "cpu", "rmsnorm"),
            "extern \"C\" void rmsnorm(const T* x, const T* w, T* y, int64_t M, int64_t N, float eps)");
}

TEST_F(LlmPromptTest, PromptCarriesContractParentProfileHintFailuresAndRepairLog) {
  proto::ParentInfo parent{"cand-1", "// parent source text\n", {{"BLOCK", "256"}}, 41.5,
                           {{"prof.dram_throughput_pct", 88.0}}, "memory-bound"};
  PromptInput in;
  in.spec = &spec_;
  in.backend = "cuda";
  in.tmpl = cuda_;
  in.parent = &parent;
  in.operator_hint = "memory access";
  in.recent_failures = {"compile_error: error: identifier \"foo\" is undefined"};
  ChatRequest r = build_prompt(in);
  EXPECT_NE(r.system.find("```cuda"), std::string::npos);
  EXPECT_NE(r.system.find("\"params\""), std::string::npos);
  for (const char* part : {"rmsnorm(const T* x", "RMS normalization", "ELEMS", "ELEMS * S <= 128",
                           "cdiv(M, ROWS)", "// parent source text", "41.5 us", "memory-bound",
                           "prof.dram_throughput_pct = 88", "memory access", "identifier \"foo\""}) {
    EXPECT_NE(r.user.find(part), std::string::npos) << part << "\n" << r.user;
  }
  EXPECT_EQ(r.user.find("## Repair"), std::string::npos);

  proto::FailedChild failed{"cand-9", "cand-1", "broken source text", {{"BLOCK", "512"}}, "compile_error",
                            std::string(20000, 'a') + "LAST LINE OF THE LOG"};
  in.repair = &failed;
  in.log_chars = 1000;
  in.previous_rejection = "no fenced code block in the reply";
  r = build_prompt(in);
  EXPECT_NE(r.user.find("## Repair"), std::string::npos);
  EXPECT_NE(r.user.find("broken source text"), std::string::npos);
  EXPECT_NE(r.user.find("LAST LINE OF THE LOG"), std::string::npos);  // the tail of a long log is kept
  EXPECT_LT(r.user.size(), 4000u);
  EXPECT_NE(r.user.find("previous answer was refused: no fenced code block"), std::string::npos);
}

// The coordinator asks about the seed too: the prompt says that the seed's own entry point and
// launch are not the contract, and names the template's; a template child's prompt does not.
TEST_F(LlmPromptTest, ASeedParentIsToldApartFromTheContract) {
  proto::ParentInfo seed{"cand-seed", "// the seed's own kernel\n", {}, 90.0, {}, ""};
  PromptInput in;
  in.spec = &spec_;
  in.backend = "cuda";
  in.tmpl = cuda_;
  in.parent = &seed;
  ChatRequest r = build_prompt(in);
  EXPECT_NE(r.user.find("This parent is the target's seed"), std::string::npos) << r.user;
  EXPECT_NE(r.user.find("entry point " + cuda_->kernel_name), std::string::npos) << r.user;
  proto::ParentInfo child{"cand-2", "// a template child\n", {}, 50.0, {}, ""};
  for (const auto& [name, values] : cuda_->space)
    child.params[name] = std::to_string(values.front());
  in.parent = &child;
  r = build_prompt(in);
  EXPECT_EQ(r.user.find("This parent is the target's seed"), std::string::npos) << r.user;
}

TEST_F(LlmPromptTest, ReplyWithCodeAndParamsBecomesACandidate) {
  const std::string text = std::string("Sure.\n```cpp\n") + kKernel + "```\n```json\n{\"params\": {\"UNROLL\": 8}, \"note\": \"wider\"}\n```\n";
  Result<ParsedReply> r = parse_reply(text, spec_, "cpu", *cpu_, {{"UNROLL", "4"}});
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ(r->source, kKernel);
  EXPECT_EQ(r->params, (std::map<std::string, std::string>{{"UNROLL", "8"}}));
  EXPECT_EQ(r->note, "wider");
  // Without a json block the parent's parameters stay; a numeric string is an integer too.
  r = parse_reply(std::string("```c++\n") + kKernel + "```", spec_, "cpu", *cpu_, {{"UNROLL", "4"}});
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ(r->params.at("UNROLL"), "4");
  r = parse_reply(std::string("```cpp\n") + kKernel + "```\n```\n{\"params\": {\"UNROLL\": \"16\"}}\n```", spec_,
                  "cpu", *cpu_, {{"UNROLL", "4"}});
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ(r->params.at("UNROLL"), "16");
}

TEST_F(LlmPromptTest, RepliesWithoutUsableCodeAreRefusedWithTheReason) {
  auto why = [&](const std::string& text, const KernelSpec* t = nullptr, const std::string& backend = "cpu",
                 std::map<std::string, std::string> p = {{"UNROLL", "4"}}) {
    Result<ParsedReply> r = parse_reply(text, spec_, backend, t ? *t : *cpu_, p);
    return r.is_ok() ? std::string("accepted") : r.status().message();
  };
  EXPECT_EQ(why("I would unroll the loop by eight."), "no fenced code block in the reply");
  EXPECT_EQ(why("```cpp\n   \n```"), "the code block is empty");
  EXPECT_EQ(why("```cpp\nextern \"C\" void rmsnorm_v2(const T* x) {}\n```"),
            "the source does not define the entry point 'rmsnorm'");
  EXPECT_NE(why(std::string("```cpp\n") + kKernel + "```\n```json\n{\"params\": {\"TILE\": 4}}\n```")
                .find("'TILE', not a template parameter"),
            std::string::npos);
  EXPECT_NE(why(std::string("```cpp\n") + kKernel + "```\n```json\n{\"params\": {\"UNROLL\": 2.5}}\n```")
                .find("not an integer"),
            std::string::npos);
  EXPECT_EQ(why(std::string("```cpp\n") + kKernel + "```\n```json\n{\"params\": [1]}\n```"),
            "\"params\" is not an object");
  EXPECT_EQ(why(std::string("```cpp\n") + kKernel + "```\n```json\nnot json\n```"),
            "the json block is not a JSON object");
  EXPECT_EQ(why(std::string("```cpp\n") + std::string(kMaxSourceBytes, ' ') + kKernel + "```"),
            "the source is larger than 262144 bytes");
  // rmsnorm's cuda template: ROWS=1 needs BLOCK * ELEMS == 8192.
  const std::string cuda_kernel = "```cuda\nextern \"C\" __global__ void rmsnorm() {}\n```\n";
  const std::map<std::string, std::string> cuda_parent{{"BLOCK", "1024"}, {"ELEMS", "8"}, {"ROWS", "1"},
                                                       {"WREG", "0"}, {"HINT", "0"}};
  EXPECT_EQ(why(cuda_kernel, cuda_, "cuda", cuda_parent), "accepted");
  EXPECT_NE(why(cuda_kernel + "```json\n{\"params\": {\"ELEMS\": 16}}\n```", cuda_, "cuda", cuda_parent)
                .find("break the template's constraints"),
            std::string::npos);
  EXPECT_EQ(why(cuda_kernel, cuda_, "cuda", {{"BLOCK", "1024"}}), "no value for the template parameter ELEMS");
}

TEST(LlmNovelty, SameCodeUpToWhitespaceAndCommentsHasOneNormalForm) {
  const std::string a = "// header\nint f(int x) {\n  return x + 1;  /* add */\n}\n";
  const std::string b = "int f(int x){return x+1;}";
  const std::string c = "int f(int x) { return x + 2; }";
  EXPECT_EQ(normal_form(a), normal_form(b));
  EXPECT_NE(normal_form(a), normal_form(c));
  EXPECT_EQ(normal_form("unsigned   int x;"), "unsigned int x;");
  EXPECT_NE(normal_form("const char* s = \"a // b\";"), normal_form("const char* s = \"a \";"));
  EXPECT_EQ(novelty_key(a, {{"U", "4"}}), novelty_key(b, {{"U", "4"}}));
  EXPECT_NE(novelty_key(a, {{"U", "4"}}), novelty_key(a, {{"U", "8"}}));
}

}  // namespace
}  // namespace kiln::agent::llm
