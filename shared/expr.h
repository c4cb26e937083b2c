// Arithmetic expressions over named integer variables (muparser), used by target specs for launch
// geometry, bytes moved, flops and parameter constraints: "cdiv(N, BLOCK*VEC)", "M*N*2*S".
#pragma once

#include <map>
#include <string>

#include "shared/status.h"

namespace kiln {

using ExprVars = std::map<std::string, double>;

// Evaluates `expr` with `vars`. Besides muparser's built-ins (min, max, +, *, /, ^, comparisons,
// &&, ||, ?:) it defines cdiv(a, b) = ceil(a / b), idiv(a, b) = floor(a / b) and pow2(x) = 2^x.
// Unknown variables, syntax errors and non-finite results are errors naming the expression.
Result<double> eval_expr(const std::string& expr, const ExprVars& vars);

// eval_expr for values that must be non-negative integers (grid sizes, byte counts).
Result<int64_t> eval_int_expr(const std::string& expr, const ExprVars& vars);

}  // namespace kiln
