// Target expressions (shared/expr.h: muparser syntax over dims, S and parameters) turned into C++,
// so an exported launcher computes grid, block, shared memory and the template's constraints for
// any shape exactly as kiln's evaluator did: the same operators, the same precedence (muparser's,
// written out as parentheses), double arithmetic throughout, cdiv/idiv/pow2 as kiln defines them.
#pragma once

#include <map>
#include <string>

#include "shared/status.h"

namespace kiln::exporter {

// How names in an expression become C++: each variable the expression may use maps to the C++
// text that stands for it (a dim: "d_M"; a baked parameter: its value "256"; S: "2.0").
using CppNames = std::map<std::string, std::string>;

// `expr` as one C++ expression of type double. The text uses kiln_cdiv, kiln_idiv, kiln_pow2,
// kiln_min, kiln_max, kiln_rint and kiln_sign, which cpp_expr_helpers() defines. An unknown name,
// an unknown function or a syntax error is INVALID_ARGUMENT naming the expression.
Result<std::string> expr_to_cpp(const std::string& expr, const CppNames& names);

// The definitions the translated expressions call (static inline functions; <cmath> included),
// for host code.
std::string cpp_expr_helpers();

}  // namespace kiln::exporter
