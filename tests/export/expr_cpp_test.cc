// expr_to_cpp against muparser itself: every expression is translated, compiled with the host C++
// compiler into one program and run; each value must equal eval_expr's bit for bit. The cases are
// muparser's precedence corners and every launch expression and constraint of the built-in
// targets at every shape they list.
#include "export/expr_cpp.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <sstream>

#include "evaluator/evaluation.h"
#include "shared/expr.h"
#include "shared/target_spec.h"
#include "tests/support/test_env.h"

namespace kiln::exporter {
namespace {

struct Case {
  std::string expr;
  ExprVars vars;
};

// Runs every case through the compiled translation; returns one line per case ("%.17g" or "nan").
std::vector<std::string> compiled_values(const std::vector<Case>& cases, std::string* why) {
  std::string program = cpp_expr_helpers() + "#include <cstdio>\nint main() {\n";
  for (const auto& c : cases) {
    CppNames names;
    std::string decl;
    for (const auto& [k, v] : c.vars) {
      char buf[64];
      std::snprintf(buf, sizeof buf, "%.17g", v);
      names[k] = "v_" + k;
      decl += "const double v_" + k + " = " + buf + "; (void)v_" + k + "; ";
    }
    Result<std::string> e = expr_to_cpp(c.expr, names);
    if (!e.is_ok()) {
      *why = e.status().message();
      return {};
    }
    program += "  { " + decl + "std::printf(\"%.17g\\n\", static_cast<double>(" + *e + ")); }\n";
  }
  program += "  return 0;\n}\n";
  testing::TempDir dir;
  const std::string src = dir.write("values.cc", program);
  std::string out;
  if (testing::run_command("c++ -std=c++17 -O0 -o " + dir.file("values") + " " + src, &out) != 0) {
    *why = "the translation did not compile:\n" + out;
    return {};
  }
  if (testing::run_command(dir.file("values"), &out) != 0) {
    *why = "the program failed: " + out;
    return {};
  }
  std::vector<std::string> lines;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

void expect_same_as_muparser(const std::vector<Case>& cases) {
  std::string why;
  const std::vector<std::string> got = compiled_values(cases, &why);
  ASSERT_EQ(got.size(), cases.size()) << why;
  for (size_t i = 0; i < cases.size(); ++i) {
    Result<double> want = eval_expr(cases[i].expr, cases[i].vars);
    if (!want.is_ok()) {  // not finite in muparser: the translation must not be finite either
      EXPECT_TRUE(got[i] == "nan" || got[i] == "-nan" || got[i] == "inf" || got[i] == "-inf")
          << cases[i].expr << " = " << got[i];
      continue;
    }
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.17g", *want);
    EXPECT_EQ(got[i], buf) << cases[i].expr;
  }
}

TEST(ExprCpp, FollowsMuparsersPrecedenceAndFunctions) {
  const ExprVars v = {{"M", 7}, {"N", 3}, {"B", 256}};
  expect_same_as_muparser({
      {"-2^2", v},
      {"2^3^2", v},
      {"2^-1", v},
      {"-M^2", v},
      {"M - N - 1", v},
      {"M / N / 2", v},
      {"M / N * 2", v},
      {"1 + 2 * 3 - 4 / 8", v},
      {"M > N == 1", v},
      {"M < N || N < M", v},
      {"M && 0 || 1", v},
      {"1 || 0 && 0", v},
      {"M > 3 ? N > 2 ? 10 : 20 : 30", v},
      {"0 ? 1 : 0 ? 2 : 3", v},
      {"min(M, N, 2)", v},
      {"max(M, 9, N)", v},
      {"cdiv(M, N)", v},
      {"idiv(M, N)", v},
      {"pow2(N)", v},
      {"sqrt(M * N)", v},
      {"log(1000)", v},
      {"ln(M)", v},
      {"log2(B)", v},
      {"abs(N - M)", v},
      {"rint(2.5)", v},
      {"sign(N - M)", v},
      {"sum(M, N, 1)", v},
      {"avg(M, N)", v},
      {"1e3 + .5", v},
      {"2.5e-1 * M", v},
      {"(M + N) * (M - N)", v},
      {"M <= 7 && N >= 3 && M != N", v},
      {"cdiv(M, 0)", v},
  });
}

TEST(ExprCpp, RefusesWhatItCannotTranslate) {
  EXPECT_FALSE(expr_to_cpp("M + Q", {{"M", "m"}}).is_ok());    // unknown name
  EXPECT_FALSE(expr_to_cpp("foo(M)", {{"M", "m"}}).is_ok());   // unknown function
  EXPECT_FALSE(expr_to_cpp("cdiv(M)", {{"M", "m"}}).is_ok());  // arity
  EXPECT_FALSE(expr_to_cpp("M +", {{"M", "m"}}).is_ok());      // syntax
  EXPECT_FALSE(expr_to_cpp("M ? 1", {{"M", "m"}}).is_ok());    // ?: without :
  EXPECT_FALSE(expr_to_cpp("M % 2", {{"M", "m"}}).is_ok());    // not muparser's
  Result<std::string> e = expr_to_cpp("foo(M)", {{"M", "m"}});
  EXPECT_NE(e.status().message().find("foo(M)"), std::string::npos) << e.status().message();
}

// Every grid, block and shared-memory expression and every constraint of the built-in targets,
// with the template's first valid configuration (and the seed's defines), at every shape.
TEST(ExprCpp, AgreesWithMuparserOnEveryBuiltInTargetExpression) {
  Result<std::vector<TargetSpec>> targets = load_targets(default_targets_dir());
  ASSERT_TRUE(targets.is_ok()) << targets.status().message();
  std::vector<Case> cases;
  for (const TargetSpec& t : *targets) {
    std::vector<Shape> shapes = {t.benchmark};
    for (const auto* list : {&t.smoke, &t.sweep, &t.edge})
      shapes.insert(shapes.end(), list->begin(), list->end());
    for (const auto& [backend, b] : t.backends) {
      std::vector<std::pair<const KernelSpec*, std::map<std::string, std::string>>> kernels = {
          {&b.seed, b.seed.defines}};
      if (b.tunable) {
        std::map<std::string, std::string> first;
        eval::for_each_config(*b.tunable, b.benchmark.value_or(t.benchmark), b.dtypes.front(),
                              [&](const auto& p) {
                                first = p;
                                return false;
                              });
        kernels.push_back({&*b.tunable, first});
      }
      for (const auto& [k, params] : kernels) {
        std::vector<std::string> exprs = {k->grid[0],  k->grid[1],  k->grid[2],     k->block[0],
                                          k->block[1], k->block[2], k->shared_bytes};
        exprs.insert(exprs.end(), k->constraints.begin(), k->constraints.end());
        for (const Shape& s : shapes) {
          for (const auto& e : exprs) cases.push_back({e, expr_vars(s, b.dtypes.front(), params)});
        }
      }
    }
  }
  ASSERT_GT(cases.size(), 500u);
  expect_same_as_muparser(cases);
}

}  // namespace
}  // namespace kiln::exporter
