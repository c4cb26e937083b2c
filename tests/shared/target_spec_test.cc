#include "shared/target_spec.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>

#include "tests/support/test_env.h"

namespace kiln {
namespace {

std::string builtin(const std::string& name) { return testing::builtin_targets_dir() + "/" + name; }

TEST(TargetSpec, LoadsBuiltInRmsnorm) {
  Result<TargetSpec> t = load_target(builtin("rmsnorm"));
  ASSERT_TRUE(t.is_ok()) << t.status().to_string();
  EXPECT_EQ(t->name, "rmsnorm");
  EXPECT_EQ(t->dims, (std::vector<std::string>{"M", "N"}));
  EXPECT_EQ(t->inputs().size(), 2u);
  EXPECT_EQ(t->outputs().size(), 1u);
  EXPECT_EQ(t->benchmark.at("M"), 8192);
  ASSERT_NE(t->backend("cuda"), nullptr);
  ASSERT_TRUE(t->backend("cuda")->tunable.has_value());
  EXPECT_EQ(t->backend("cuda")->tunable->space.at("BLOCK").size(), 4u);
  ASSERT_NE(t->backend("triton"), nullptr);
  EXPECT_EQ(t->backend("triton")->seed.kernel_name, "rmsnorm_seed");
  EXPECT_EQ(t->backend("triton")->tunable->space.at("num_warps"), (std::vector<int64_t>{4, 8, 16}));
  EXPECT_FALSE(t->reference_source.empty());
  EXPECT_EQ(t->spec_hash.size(), 64u);
  // bytes moved at the benchmark shape in f16: 2*8192*8192*2 + 8192*2
  Result<double> bytes = eval_expr(t->bytes_expr, expr_vars(t->benchmark, DType::kF16, {}));
  ASSERT_TRUE(bytes.is_ok());
  EXPECT_DOUBLE_EQ(*bytes, 2.0 * 8192 * 8192 * 2 + 8192 * 2);
}

TEST(TargetSpec, BackendBenchmarkOverridesTheTargetsForThatBackendOnly) {
  Result<TargetSpec> t = load_target(builtin("matmul"));
  ASSERT_TRUE(t.is_ok()) << t.status().to_string();
  EXPECT_EQ(t->benchmark_for("cuda").at("M"), 4096);
  EXPECT_EQ(t->benchmark_for("cpu").at("M"), 256);
  EXPECT_EQ(t->benchmark_for("rocm").at("M"), 4096);
}

TEST(TargetSpec, ReadsReferenceRows) {
  Result<TargetSpec> t = load_target(builtin("flash_attention"));
  ASSERT_TRUE(t.is_ok()) << t.status().to_string();
  EXPECT_EQ(t->reference_rows, (std::vector<std::string>{"B", "H", "L"}));
  Result<TargetSpec> r = load_target(builtin("rmsnorm"));
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_TRUE(r->reference_rows.empty());  // the default: the outputs' first dim
}

// The rows kiln_reference_terms is called over: reference_rows where given, else the first dim
// that every output shares, else none (outputs that disagree, or a scalar output).
TEST(TargetSpec, ReferenceRowDimsAreTheGivenRowsOrTheOutputsSharedFirstDim) {
  Result<TargetSpec> flash = load_target(builtin("flash_attention"));
  ASSERT_TRUE(flash.is_ok()) << flash.status().to_string();
  EXPECT_EQ(reference_row_dims(*flash), (std::vector<std::string>{"B", "H", "L"}));
  Result<TargetSpec> t = load_target(builtin("rmsnorm"));
  ASSERT_TRUE(t.is_ok()) << t.status().to_string();
  EXPECT_EQ(reference_row_dims(*t), std::vector<std::string>{"M"});
  TargetArg second = *t->outputs().front();
  second.name = "z";
  t->args.push_back(second);
  EXPECT_EQ(reference_row_dims(*t), std::vector<std::string>{"M"});  // both rows of M
  t->args.back().shape = {"N"};
  EXPECT_TRUE(reference_row_dims(*t).empty());  // M and N: no rows
  t->args.back().shape.clear();
  EXPECT_TRUE(reference_row_dims(*t).empty());  // a scalar output: no rows
  t->reference_rows = {"M"};
  EXPECT_EQ(reference_row_dims(*t), std::vector<std::string>{"M"});  // given rows win
}

TEST(TargetSpec, LoadsEveryBuiltInTarget) {
  Result<std::vector<TargetSpec>> all = load_targets(testing::builtin_targets_dir());
  ASSERT_TRUE(all.is_ok()) << all.status().to_string();
  std::vector<std::string> names;
  for (const auto& t : *all) names.push_back(t.name);
  for (const char* expected :
       {"cross_entropy", "flash_attention", "fused_mlp", "layernorm", "matmul", "reduce", "rmsnorm",
        "rotary_embedding", "softmax", "vectorsum_v2", "prefixsum_v2"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), expected), names.end()) << expected;
  }
}

TEST(TargetSpec, ReadsScratchIndexBoundAndRmsTolerance) {
  testing::TempDir dir;
  for (const auto& e : std::filesystem::directory_iterator(builtin("rmsnorm"))) {
    std::filesystem::copy(e.path(), dir.path() + "/" + e.path().filename().string());
  }
  std::ifstream in(dir.file("target.json"));
  nlohmann::json j = nlohmann::json::parse(in);
  j["args"].push_back({{"name", "ws"}, {"role", "scratch"}, {"dtype", "f32"}, {"shape", {"M"}}});
  j["args"].push_back({{"name", "labels"},
                       {"role", "input"},
                       {"dtype", "i32"},
                       {"shape", {"M"}},
                       {"index_bound", "N - 1"}});
  j["tolerance"]["f16"]["rms"] = 0.01;
  j["tolerance"]["f16"]["terms"] = 3e-4;
  j["args"][1]["scale"] = "1/sqrt(N)";
  j["adversarial_skip"] = {
      {"f16", {{"distributions", {"large_magnitude"}}, {"reason", "overflows"}}}};
  dir.write("target.json", j.dump(2));
  Result<TargetSpec> t = load_target(dir.path());
  ASSERT_TRUE(t.is_ok()) << t.status().to_string();
  EXPECT_EQ(t->args[4].role, TargetArg::Role::kScratch);
  EXPECT_EQ(t->args[5].index_bound, "N - 1");
  EXPECT_EQ(t->args[1].scale, "1/sqrt(N)");
  ASSERT_EQ(t->adversarial_skip.count(DType::kF16), 1u);
  EXPECT_EQ(t->adversarial_skip.at(DType::kF16).first, std::vector<std::string>{"large_magnitude"});
  EXPECT_EQ(t->adversarial_skip.at(DType::kF16).second, "overflows");
  EXPECT_DOUBLE_EQ(t->tolerance.at(DType::kF16).rms, 0.01);
  EXPECT_DOUBLE_EQ(t->tolerance.at(DType::kBF16).rms, 0.0);
  EXPECT_DOUBLE_EQ(t->tolerance.at(DType::kF16).terms, 3e-4);
  EXPECT_DOUBLE_EQ(t->tolerance.at(DType::kBF16).terms, 0.0);
  EXPECT_EQ(t->inputs().size(), 3u);  // x, w, labels: the scratch buffer is not an input
  EXPECT_EQ(t->benchmark_for("cuda"), t->benchmark);  // no backend shape: the target's
  EXPECT_EQ(t->outputs().size(), 1u);
}

// The leaderboard targets: a tolerance that scales with the shape, and the task a submission is
// for.
TEST(TargetSpec, ScalesATolerancePerShapeAndReadsTheLeaderboardTask) {
  Result<TargetSpec> t = load_target(builtin("prefixsum_v2"));
  ASSERT_TRUE(t.is_ok()) << t.status().to_string();
  const Tolerance small = tolerance_at(*t, DType::kF32, {{"N", 1024}});
  const Tolerance big = tolerance_at(*t, DType::kF32, {{"N", 268435456}});
  EXPECT_DOUBLE_EQ(small.rel, 1e-5 * 32);
  EXPECT_DOUBLE_EQ(big.abs, 1e-5 * 16384);
  ASSERT_TRUE(t->leaderboard.has_value());
  EXPECT_EQ(t->leaderboard->task, "prefixsum_v2");
  EXPECT_EQ(t->leaderboard->inputs.at("x"), "data[0]");

  testing::TempDir dir;
  for (const auto& e : std::filesystem::directory_iterator(builtin("prefixsum_v2"))) {
    std::filesystem::copy(e.path(), dir.path() + "/" + e.path().filename().string());
  }
  const nlohmann::json good = nlohmann::json::parse(std::ifstream(dir.file("target.json")));
  auto refused = [&](const std::function<void(nlohmann::json&)>& edit, const std::string& says) {
    nlohmann::json j = good;
    edit(j);
    dir.write("target.json", j.dump(2));
    Result<TargetSpec> r = load_target(dir.path());
    ASSERT_FALSE(r.is_ok()) << says;
    EXPECT_NE(r.status().message().find(says), std::string::npos) << r.status().message();
  };
  refused([](nlohmann::json& j) { j["tolerance"]["f32"]["scale"] = "N - 1"; }, "scale");
  refused([](nlohmann::json& j) { j["tolerance"]["f32"]["scale"] = "sqrt(Q)"; }, "scale");
  refused(
      [](nlohmann::json& j) {
        j["leaderboard"]["inputs"] = {{"z", "data[0]"}};
      },
      "'x' is not taken from data");
  refused(
      [](nlohmann::json& j) {
        j["leaderboard"]["outputs"] = {{"q", "data[1]"}};
      },
      "'q' is not an output");
  refused([](nlohmann::json& j) { j["leaderboard"]["gpus"] = nlohmann::json::array(); }, "gpus");
}

TEST(Expr, EvaluatesGeometryWithHelpers) {
  ExprVars v = {{"M", 1000}, {"ROWS", 4}, {"N", 10}};
  EXPECT_EQ(*eval_int_expr("cdiv(M, ROWS)", v), 250);
  EXPECT_EQ(*eval_int_expr("cdiv(M + 1, ROWS)", v), 251);
  EXPECT_EQ(*eval_int_expr("max(N, 32)", v), 32);
  EXPECT_EQ(*eval_expr("ROWS * 32 <= 256", v), 1.0);
  Result<double> unknown = eval_expr("M * Q", v);
  ASSERT_FALSE(unknown.is_ok());
  EXPECT_NE(unknown.status().message().find("M * Q"), std::string::npos);
  EXPECT_FALSE(eval_int_expr("M / 3", v).is_ok());  // not an integer
  EXPECT_FALSE(eval_expr("cdiv(M, 0)", v).is_ok());
}

TEST(Expr, AProgramParsedOnceGivesWhatEvalExprGivesAsItsVariablesChange) {
  const std::vector<std::string> exprs = {"cdiv(M, ROWS) * (ROWS <= 8 ? 1 : 2)",
                                          "ROWS * 32 <= 256 && M >= 1000", "idiv(M, ROWS)"};
  Result<ExprProgram> p = ExprProgram::compile(exprs, {"M", "ROWS"});
  ASSERT_TRUE(p.is_ok()) << p.status().to_string();
  ASSERT_EQ(p->size(), 3u);
  const size_t m = p->variable("M"), rows = p->variable("ROWS");
  ASSERT_NE(m, ExprProgram::npos);
  ASSERT_NE(rows, ExprProgram::npos);
  EXPECT_EQ(p->variable("Q"), ExprProgram::npos);
  for (double mv : {7.0, 1000.0, 1001.0}) {
    for (double rv : {1.0, 4.0, 9.0, 16.0}) {
      p->set(m, mv);
      p->set(rows, rv);
      const ExprVars v = {{"M", mv}, {"ROWS", rv}};
      for (size_t i = 0; i < exprs.size(); ++i) {
        ASSERT_TRUE(p->eval(i).is_ok());
        EXPECT_EQ(*p->eval(i), *eval_expr(exprs[i], v))
            << exprs[i] << " at M=" << mv << " ROWS=" << rv;
      }
    }
  }
  p->set(rows, 0);
  Result<double> div0 = p->eval(0);  // cdiv by zero: not finite, an error as in eval_expr
  ASSERT_FALSE(div0.is_ok());
  EXPECT_NE(div0.status().message().find("cdiv(M, ROWS)"), std::string::npos);
  // Errors come at compile time, naming the expression.
  Result<ExprProgram> unknown = ExprProgram::compile({"M * 2", "M * Q"}, {"M"});
  ASSERT_FALSE(unknown.is_ok());
  EXPECT_NE(unknown.status().message().find("M * Q"), std::string::npos);
  EXPECT_FALSE(ExprProgram::compile({"M * (2"}, {"M"}).is_ok());
  EXPECT_FALSE(ExprProgram::compile({""}, {"M"}).is_ok());
}

// A broken copy of rmsnorm's spec: each case edits one field and names what the error must say.
struct BrokenSpec {
  const char* label;
  std::function<void(nlohmann::json&)> edit;
  const char* expected;
};

void PrintTo(const BrokenSpec& c, std::ostream* os) { *os << c.label; }

class TargetSpecRejects : public ::testing::TestWithParam<BrokenSpec> {};

TEST_P(TargetSpecRejects, WithFileFieldAndProblem) {
  testing::TempDir dir;
  for (const auto& e : std::filesystem::directory_iterator(builtin("rmsnorm"))) {
    std::filesystem::copy(e.path(), dir.path() + "/" + e.path().filename().string());
  }
  std::ifstream in(dir.file("target.json"));
  nlohmann::json j = nlohmann::json::parse(in);
  GetParam().edit(j);
  dir.write("target.json", j.dump(2));
  Result<TargetSpec> t = load_target(dir.path());
  ASSERT_FALSE(t.is_ok()) << GetParam().label;
  EXPECT_NE(t.status().message().find("target.json"), std::string::npos) << t.status().message();
  EXPECT_NE(t.status().message().find(GetParam().expected), std::string::npos)
      << GetParam().label << ": " << t.status().message();
}

INSTANTIATE_TEST_SUITE_P(
    Table, TargetSpecRejects,
    ::testing::Values(
        BrokenSpec{"no name", [](auto& j) { j.erase("name"); }, "field 'name': missing"},
        BrokenSpec{"unknown dim in shape",
                   [](auto& j) {
                     j["args"][0]["shape"] = {"M", "K"};
                   },
                   "unknown dim 'K'"},
        BrokenSpec{"bad role", [](auto& j) { j["args"][0]["role"] = "inout"; },
                   "field 'args[0].role': 'inout'"},
        BrokenSpec{"bad dtype", [](auto& j) { j["dtypes"] = {"f8"}; }, "unknown dtype 'f8'"},
        BrokenSpec{"missing tolerance", [](auto& j) { j["tolerance"].erase("bf16"); },
                   "field 'tolerance.bf16': missing"},
        BrokenSpec{"shape misses a dim", [](auto& j) { j["shapes"]["benchmark"].erase("N"); },
                   "dim 'N' missing"},
        BrokenSpec{"zero-size shape", [](auto& j) { j["shapes"]["smoke"][0]["M"] = 0; },
                   "expected a positive integer"},
        BrokenSpec{"bad bytes expression", [](auto& j) { j["bytes"] = "M * * N"; },
                   "field 'bytes'"},
        BrokenSpec{"grid with unknown variable",
                   [](auto& j) { j["backends"]["cuda"]["seed"]["grid"] = {"ROWS"}; },
                   "backends.cuda.seed"},
        BrokenSpec{"missing source file",
                   [](auto& j) { j["backends"]["cuda"]["seed"]["source"] = "nope.cu"; },
                   "cannot read"},
        BrokenSpec{"source outside folder",
                   [](auto& j) { j["backends"]["cuda"]["seed"]["source"] = "../x.cu"; },
                   "inside the target's folder"},
        BrokenSpec{"seed with a space",
                   [](auto& j) {
                     j["backends"]["cuda"]["seed"]["params"] = {{"B", {1}}};
                   },
                   "only a template"},
        BrokenSpec{"unknown backend",
                   [](auto& j) { j["backends"]["rocm"] = nlohmann::json::object(); },
                   "field 'backends.rocm': unknown key"},
        BrokenSpec{"triton block that is not 32 * num_warps",
                   [](auto& j) { j["backends"]["triton"]["template"]["block"] = {"128"}; },
                   "backends.triton.template.block': a Triton program runs 32 * num_warps"},
        BrokenSpec{"backend dtype not in target",
                   [](auto& j) { j["backends"]["cpu"]["dtypes"] = {"f64"}; },
                   "not among the target's dtypes"},
        BrokenSpec{"misspelt key", [](auto& j) { j["flopz"] = "1"; }, "field 'flopz': unknown key"},
        BrokenSpec{"reference rows that are not the outputs' leading dims",
                   [](auto& j) { j["reference_rows"] = {"N"}; },
                   "field 'reference_rows': must be leading dims of every output's shape ('y'"},
        BrokenSpec{"reference rows not a list of names", [](auto& j) { j["reference_rows"] = 2; },
                   "field 'reference_rows'"},
        BrokenSpec{"index bound on a float input",
                   [](auto& j) { j["args"][0]["index_bound"] = "N"; },
                   "field 'args[0].index_bound': only for inputs of a fixed integer dtype"},
        BrokenSpec{"index bound with an unknown variable",
                   [](auto& j) {
                     j["args"][1]["dtype"] = "i32";
                     j["args"][1]["index_bound"] = "V";
                   },
                   "field 'args[1].index_bound'"},
        BrokenSpec{"backend benchmark misses a dim",
                   [](auto& j) {
                     j["backends"]["cpu"]["benchmark"] = {{"M", 4}};
                   },
                   "backends.cpu.benchmark"},
        BrokenSpec{"scale on an output", [](auto& j) { j["args"][2]["scale"] = "2"; },
                   "field 'args[2].scale': only for inputs"},
        BrokenSpec{"scale that is not positive", [](auto& j) { j["args"][1]["scale"] = "0 * N"; },
                   "field 'args[1].scale': must be positive"},
        BrokenSpec{
            "unknown adversarial distribution",
            [](auto& j) {
              j["adversarial_skip"] = {{"f16", {{"distributions", {"huge"}}, {"reason", "x"}}}};
            },
            "'huge' is not an adversarial distribution"},
        BrokenSpec{
            "adversarial skip without a reason",
            [](auto& j) {
              j["adversarial_skip"] = {{"f16", {{"distributions", {"zeros"}}, {"reason", ""}}}};
            },
            "field 'adversarial_skip.f16.reason'"},
        BrokenSpec{"negative rms tolerance", [](auto& j) { j["tolerance"]["f16"]["rms"] = -1; },
                   "tolerances are finite numbers >= 0"},
        BrokenSpec{"negative terms tolerance",
                   [](auto& j) { j["tolerance"]["bf16"]["terms"] = -1e-5; },
                   "field 'tolerance.bf16': tolerances are finite numbers >= 0"},
        BrokenSpec{"terms tolerance as text",
                   [](auto& j) { j["tolerance"]["f16"]["terms"] = "4e-5"; }, "terms"},
        // Found by trying to break kiln: each got past the loader and failed later, or not at all.
        BrokenSpec{"backend with no dtypes",
                   [](auto& j) { j["backends"]["cpu"]["dtypes"] = nlohmann::json::array(); },
                   "field 'backends.cpu.dtypes': needs at least one"},
        BrokenSpec{"a dim twice",
                   [](auto& j) {
                     j["dims"] = {"M", "N", "M"};
                   },
                   "field 'dims': 'M' appears twice"},
        BrokenSpec{"an argument named like a dim", [](auto& j) { j["args"][1]["name"] = "N"; },
                   "'N' is also a dim"},
        BrokenSpec{"a parameter named like a dim",
                   [](auto& j) { j["backends"]["cpu"]["template"]["params"]["M"] = {1}; },
                   "field 'backends.cpu.template.params.M': the name of a dim"},
        BrokenSpec{"a parameter named T",
                   [](auto& j) { j["backends"]["cuda"]["template"]["params"]["T"] = {1}; },
                   "params.T': T is the element type"},
        BrokenSpec{"a define that is not a macro name",
                   [](auto& j) {
                     j["backends"]["cpu"]["seed"]["defines"] = {{"a b", "1"}};
                   },
                   "field 'backends.cpu.seed.defines': 'a b': not a macro name"},
        BrokenSpec{"a parameter value past 2^53",
                   [](auto& j) {
                     j["backends"]["cpu"]["template"]["params"]["UNROLL"] = {uint64_t{1} << 63};
                   },
                   "values are integers from -2^53 to 2^53"},
        BrokenSpec{"a space too large to list",
                   [](auto& j) {
                     for (int i = 0; i < 21; ++i) {
                       j["backends"]["cpu"]["template"]["params"]["P" + std::to_string(i)] = {1, 2};
                     }
                   },
                   "the space has more than 1048576 combinations"},
        BrokenSpec{"a constraint that divides by zero",
                   [](auto& j) { j["backends"]["cpu"]["template"]["constraints"] = {"UNROLL/0"}; },
                   "field 'backends.cpu.template.constraints[0]'"},
        BrokenSpec{"no sweep shapes",
                   [](auto& j) { j["shapes"]["sweep"] = nlohmann::json::array(); },
                   "field 'shapes.sweep': needs at least one shape"},
        BrokenSpec{"negative bytes", [](auto& j) { j["bytes"] = "-M"; },
                   "field 'bytes': -8192 at the benchmark shape"},
        BrokenSpec{"an edge shape whose tensors cannot be held",
                   [](auto& j) {
                     j["shapes"]["edge"] = {{{"M", 2147483647}, {"N", 2147483647}}};
                   },
                   "field 'shapes.edge[0]': shape M=2147483647,N=2147483647 of 'rmsnorm': tensor "
                   "'x' would hold"}),
    [](const auto& info) {
      std::string s = info.param.label;
      for (char& c : s)
        if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
      return s;
    });

}  // namespace
}  // namespace kiln
