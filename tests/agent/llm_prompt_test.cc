// Prompts and reply parsing of the LLM proposer on the real rmsnorm target: what a prompt tells
// the model, which replies become candidates and why the others are refused, and the normal form
// behind novelty.
#include <gtest/gtest.h>

#include "agent/llm/prompt.h"
#include "tests/support/test_env.h"

namespace kiln::agent::llm {
namespace {

class LlmPromptTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Result<TargetSpec> s = testing::load_builtin_target("rmsnorm");
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
  // Strings that only look like integers, and an integer past int64, are not integers either (a
  // "-" once reached std::stoll, whose exception would end the agent).
  for (const char* value : {"\"-\"", "\"--\"", "\"1-2\"", "\"16x\"", "\"\"", "\" 16\"",
                            "18446744073709551615", "\"99999999999999999999\""}) {
    EXPECT_NE(why(std::string("```cpp\n") + kKernel +
                  "```\n```json\n{\"params\": {\"UNROLL\": " + value + "}}\n```")
                  .find("\"params\".UNROLL is not an integer"),
              std::string::npos)
        << value;
  }
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

// Triton templates: the prompt asks for one Python module with a @triton.jit function whose
// signature carries the template's constexprs (num_warps and num_stages are launch settings),
// and a reply's ```python block becomes the candidate; a ```cuda block is not an answer.
TEST_F(LlmPromptTest, ATritonTargetIsAskedForAndAnswersInPython) {
  const KernelSpec* triton = &*spec_.backend("triton")->tunable;
  EXPECT_EQ(
      entry_signature(spec_, "triton", "rmsnorm", triton),
      "@triton.jit\ndef rmsnorm(x, w, y, M, N, eps, BLOCK: tl.constexpr, ROW_CACHE: tl.constexpr)");
  PromptInput in;
  in.spec = &spec_;
  in.backend = "triton";
  in.tmpl = triton;
  ChatRequest r = build_prompt(in);
  for (const char* part : {"expert Triton kernel engineer", "```python", "@triton.jit function",
                           "import only triton, triton.language"}) {
    EXPECT_NE(r.system.find(part), std::string::npos) << part << "\n" << r.system;
  }
  EXPECT_EQ(r.system.find("kiln defines T"), std::string::npos) << r.system;
  EXPECT_EQ(r.system.find("-D macros"), std::string::npos) << r.system;
  for (const char* part :
       {"def rmsnorm(x, w, y, M, N, eps, BLOCK: tl.constexpr", "num_warps: 4, 8, 16",
        "programs of num_warps warps each", "BLOCK >= 256 * num_warps"}) {
    EXPECT_NE(r.user.find(part), std::string::npos) << part << "\n" << r.user;
  }
  const std::string kernel =
      "import triton\nimport triton.language as tl\n\n@triton.jit\n"
      "def rmsnorm(x, w, y, M, N, eps, BLOCK: tl.constexpr, ROW_CACHE: tl.constexpr):\n    pass\n";
  const std::map<std::string, std::string> parent{
      {"BLOCK", "4096"}, {"ROW_CACHE", "0"}, {"num_warps", "4"}, {"num_stages", "1"}};
  Result<ParsedReply> p =
      parse_reply("```python\n" + kernel + "```\n```json\n{\"params\": {\"num_warps\": 8}}\n```",
                  spec_, "triton", *triton, parent);
  ASSERT_TRUE(p.is_ok()) << p.status().to_string();
  EXPECT_EQ(p->source, kernel);
  EXPECT_EQ(p->params.at("num_warps"), "8");
  EXPECT_EQ(p->params.at("BLOCK"), "4096");
  p = parse_reply("```cuda\nextern \"C\" __global__ void rmsnorm() {}\n```", spec_, "triton",
                  *triton, parent);
  ASSERT_FALSE(p.is_ok());
  EXPECT_EQ(p.status().message(), "no fenced code block in the reply");
  // BLOCK 1024 with 8 warps breaks BLOCK >= 256 * num_warps.
  p = parse_reply(
      "```py\n" + kernel + "```\n```json\n{\"params\": {\"BLOCK\": 1024, \"num_warps\": 8}}\n```",
      spec_, "triton", *triton, parent);
  ASSERT_FALSE(p.is_ok());
  EXPECT_NE(p.status().message().find("break the template's constraints"), std::string::npos);
}

TEST(LlmNovelty, PythonKeepsItsIndentationAndFloorDivision) {
  const std::string a = "def f(x):  # doc\n    return x // 2\n\n";
  const std::string b = "def f(x):\n    return x // 2   \n";
  const std::string c = "def f(x):\n    return x // 3\n";
  const std::string d = "def f(x):\nreturn x // 2\n";
  EXPECT_EQ(normal_form(a, "triton"), normal_form(b, "triton"));
  EXPECT_NE(normal_form(a, "triton"), normal_form(c, "triton"));
  EXPECT_NE(normal_form(a, "triton"), normal_form(d, "triton"));
  EXPECT_NE(normal_form("s = '# not a comment'\n", "triton"), normal_form("s = '\n", "triton"));
  EXPECT_NE(novelty_key(a, {}, "triton"), novelty_key(c, {}, "triton"));
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
