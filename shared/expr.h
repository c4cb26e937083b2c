// Arithmetic expressions over named integer variables (muparser), used by target specs for launch
// geometry, bytes moved, flops and parameter constraints: "cdiv(N, BLOCK*VEC)", "M*N*2*S".
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "shared/status.h"

namespace kiln {

using ExprVars = std::map<std::string, double>;

// Evaluates `expr` with `vars`. Besides muparser's built-ins (min, max, +, *, /, ^, comparisons,
// &&, ||, ?:) it defines cdiv(a, b) = ceil(a / b), idiv(a, b) = floor(a / b) and pow2(x) = 2^x.
// Unknown variables, syntax errors and non-finite results are errors naming the expression.
Result<double> eval_expr(const std::string& expr, const ExprVars& vars);

// eval_expr for values that must be non-negative integers (grid sizes, byte counts).
Result<int64_t> eval_int_expr(const std::string& expr, const ExprVars& vars);

// Expressions parsed once and evaluated many times as the values of their variables change: a
// template's constraints over its whole parameter space (reduce's 10,800 combinations took
// ~2.5 s when every evaluation parsed again). Variables are fixed at compile(); set() changes a
// value by index. One program per thread (the parsers are not safe to share).
class ExprProgram {
 public:
  // Parses every expression over exactly `variables` (an unknown name or a syntax error is an
  // error naming the expression).
  static Result<ExprProgram> compile(const std::vector<std::string>& expressions,
                                     const std::vector<std::string>& variables);
  ExprProgram(ExprProgram&&) noexcept;
  ExprProgram& operator=(ExprProgram&&) noexcept;
  ~ExprProgram();

  size_t size() const;                      // expressions
  size_t variable(const std::string& name) const;  // its index, or npos
  void set(size_t variable, double value);
  // Expression `i` at the current values; non-finite results are errors, as in eval_expr.
  Result<double> eval(size_t i) const;

  static constexpr size_t npos = static_cast<size_t>(-1);

 private:
  struct Impl;
  explicit ExprProgram(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kiln
