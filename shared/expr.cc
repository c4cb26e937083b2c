// muparser wrapper: one parser per call (muparser parsers are not thread-safe to share).
#include "shared/expr.h"

#include <muParser.h>

#include <cmath>
#include <limits>

namespace kiln {
namespace {

double cdiv(double a, double b) { return b == 0 ? std::numeric_limits<double>::quiet_NaN() : std::ceil(a / b); }
double idiv(double a, double b) { return b == 0 ? std::numeric_limits<double>::quiet_NaN() : std::floor(a / b); }
double pow2(double x) { return std::exp2(x); }

}  // namespace

Result<double> eval_expr(const std::string& expr, const ExprVars& vars) {
  if (expr.empty()) return invalid_argument("empty expression");
  try {
    mu::Parser parser;
    parser.DefineFun("cdiv", cdiv);
    parser.DefineFun("idiv", idiv);
    parser.DefineFun("pow2", pow2);
    // muparser binds variables by address; the copies live until the parser is gone.
    std::map<std::string, double> storage(vars.begin(), vars.end());
    for (auto& [name, value] : storage) parser.DefineVar(name, &value);
    parser.SetExpr(expr);
    double v = parser.Eval();
    if (!std::isfinite(v)) {
      return invalid_argument("expression '" + expr + "' is not finite (division by zero?)");
    }
    return v;
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

}  // namespace kiln
