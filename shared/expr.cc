// muparser wrapper: eval_expr builds one parser per call; ExprProgram keeps one parser per
// expression, bound to its own variable slots, so muparser's bytecode is built once (muparser
// parsers are not thread-safe to share).
#include "shared/expr.h"

#include <muParser.h>

#include <cmath>
#include <limits>

namespace kiln {
namespace {

double cdiv(double a, double b) { return b == 0 ? std::numeric_limits<double>::quiet_NaN() : std::ceil(a / b); }
double idiv(double a, double b) { return b == 0 ? std::numeric_limits<double>::quiet_NaN() : std::floor(a / b); }
double pow2(double x) { return std::exp2(x); }

void define_functions(mu::Parser& parser) {
  parser.DefineFun("cdiv", cdiv);
  parser.DefineFun("idiv", idiv);
  parser.DefineFun("pow2", pow2);
}

Result<double> finite(const std::string& expr, double v) {
  if (!std::isfinite(v)) return invalid_argument("expression '" + expr + "' is not finite (division by zero?)");
  return v;
}

}  // namespace

Result<double> eval_expr(const std::string& expr, const ExprVars& vars) {
  if (expr.empty()) return invalid_argument("empty expression");
  try {
    mu::Parser parser;
    define_functions(parser);
    // muparser binds variables by address; the copies live until the parser is gone.
    std::map<std::string, double> storage(vars.begin(), vars.end());
    for (auto& [name, value] : storage) parser.DefineVar(name, &value);
    parser.SetExpr(expr);
    return finite(expr, parser.Eval());
  } catch (const mu::Parser::exception_type& e) {
    return invalid_argument("expression '" + expr + "': " + e.GetMsg());
  }
}

Result<int64_t> eval_int_expr(const std::string& expr, const ExprVars& vars) {
  KILN_ASSIGN_OR_RETURN(double v, eval_expr(expr, vars));
  if (v < 0 || v > 9.0e18 || std::floor(v) != v) {
    return invalid_argument("expression '" + expr + "' = " + std::to_string(v) +
                            ": expected a non-negative integer");
  }
  return static_cast<int64_t>(v);
}

struct ExprProgram::Impl {
  std::vector<std::string> names;
  std::unique_ptr<double[]> values;  // stable addresses: the parsers hold pointers into it
  std::vector<std::string> expressions;
  std::vector<std::unique_ptr<mu::Parser>> parsers;
};

ExprProgram::ExprProgram(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ExprProgram::ExprProgram(ExprProgram&&) noexcept = default;
ExprProgram& ExprProgram::operator=(ExprProgram&&) noexcept = default;
ExprProgram::~ExprProgram() = default;

Result<ExprProgram> ExprProgram::compile(const std::vector<std::string>& expressions,
                                         const std::vector<std::string>& variables) {
  auto impl = std::make_unique<Impl>();
  impl->names = variables;
  impl->values = std::make_unique<double[]>(variables.size());
  impl->expressions = expressions;
  for (const std::string& expr : expressions) {
    if (expr.empty()) return invalid_argument("empty expression");
    try {
      auto parser = std::make_unique<mu::Parser>();
      define_functions(*parser);
      for (size_t i = 0; i < variables.size(); ++i) parser->DefineVar(variables[i], &impl->values[i]);
      parser->SetExpr(expr);
      (void)parser->Eval();  // parses now: a bad expression fails here, not in the loop
      impl->parsers.push_back(std::move(parser));
    } catch (const mu::Parser::exception_type& e) {
      return invalid_argument("expression '" + expr + "': " + e.GetMsg());
    }
  }
  return ExprProgram(std::move(impl));
}

size_t ExprProgram::size() const { return impl_->parsers.size(); }

size_t ExprProgram::variable(const std::string& name) const {
  for (size_t i = 0; i < impl_->names.size(); ++i) {
    if (impl_->names[i] == name) return i;
  }
  return npos;
}

void ExprProgram::set(size_t variable, double value) { impl_->values[variable] = value; }

Result<double> ExprProgram::eval(size_t i) const {
  try {
    return finite(impl_->expressions[i], impl_->parsers[i]->Eval());
  } catch (const mu::Parser::exception_type& e) {
    return invalid_argument("expression '" + impl_->expressions[i] + "': " + e.GetMsg());
  }
}

}  // namespace kiln
