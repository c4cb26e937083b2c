// A recursive-descent parser over muparser's grammar that prints fully parenthesized C++. Levels,
// lowest first: ?: (right), ||, &&, comparisons (one level in muparser, two in C++: hence the
// parentheses), + -, * /, unary sign, ^ (right), then numbers, names, calls and parentheses.
#include "export/expr_cpp.h"

#include <cctype>
#include <set>
#include <vector>

namespace kiln::exporter {
namespace {

struct Token {
  enum Kind { kNumber, kName, kOp, kEnd } kind = kEnd;
  std::string text;
};

Result<std::vector<Token>> tokenize(const std::string& s) {
  static const char* kTwo[] = {"||", "&&", "==", "!=", "<=", ">="};
  std::vector<Token> out;
  size_t i = 0;
  while (i < s.size()) {
    const char c = s[i];
    if (std::isspace(static_cast<unsigned char>(c))) {
      ++i;
    } else if (std::isdigit(static_cast<unsigned char>(c)) || c == '.') {
      size_t j = i;
      while (j < s.size() && (std::isdigit(static_cast<unsigned char>(s[j])) || s[j] == '.')) ++j;
      if (j < s.size() && (s[j] == 'e' || s[j] == 'E')) {
        size_t k = j + 1;
        if (k < s.size() && (s[k] == '+' || s[k] == '-')) ++k;
        if (k < s.size() && std::isdigit(static_cast<unsigned char>(s[k]))) {
          j = k;
          while (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j]))) ++j;
        }
      }
      out.push_back({Token::kNumber, s.substr(i, j - i)});
      i = j;
    } else if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t j = i;
      while (j < s.size() && (std::isalnum(static_cast<unsigned char>(s[j])) || s[j] == '_')) ++j;
      out.push_back({Token::kName, s.substr(i, j - i)});
      i = j;
    } else {
      bool two = false;
      for (const char* op : kTwo) {
        if (s.compare(i, 2, op) == 0) {
          out.push_back({Token::kOp, op});
          i += 2;
          two = true;
          break;
        }
      }
      if (two) continue;
      if (std::string("+-*/^(),?:<>").find(c) == std::string::npos) {
        return invalid_argument(std::string("unexpected character '") + c + "'");
      }
      out.push_back({Token::kOp, std::string(1, c)});
      ++i;
    }
  }
  out.push_back({Token::kEnd, ""});
  return out;
}

class Parser {
 public:
  Parser(std::vector<Token> tokens, const CppNames& names) : t_(std::move(tokens)), names_(names) {}

  Result<std::string> whole() {
    KILN_ASSIGN_OR_RETURN(std::string e, ternary());
    if (peek().kind != Token::kEnd) return invalid_argument("unexpected '" + peek().text + "'");
    return e;
  }

 private:
  const Token& peek() const { return t_[pos_]; }
  bool take(const char* op) {
    if (peek().kind == Token::kOp && peek().text == op) {
      ++pos_;
      return true;
    }
    return false;
  }

  Result<std::string> ternary() {
    KILN_ASSIGN_OR_RETURN(std::string c, logical_or());
    if (!take("?")) return c;
    KILN_ASSIGN_OR_RETURN(std::string a, ternary());
    if (!take(":")) return invalid_argument("'?' without ':'");
    KILN_ASSIGN_OR_RETURN(std::string b, ternary());
    return "((" + c + ") != 0.0 ? (" + a + ") : (" + b + "))";
  }
  Result<std::string> logical_or() {
    KILN_ASSIGN_OR_RETURN(std::string l, logical_and());
    while (take("||")) {
      KILN_ASSIGN_OR_RETURN(std::string r, logical_and());
      l = "(((" + l + ") != 0.0 || (" + r + ") != 0.0) ? 1.0 : 0.0)";
    }
    return l;
  }
  Result<std::string> logical_and() {
    KILN_ASSIGN_OR_RETURN(std::string l, comparison());
    while (take("&&")) {
      KILN_ASSIGN_OR_RETURN(std::string r, comparison());
      l = "(((" + l + ") != 0.0 && (" + r + ") != 0.0) ? 1.0 : 0.0)";
    }
    return l;
  }
  Result<std::string> comparison() {
    KILN_ASSIGN_OR_RETURN(std::string l, additive());
    while (true) {
      std::string op;
      for (const char* o : {"==", "!=", "<=", ">=", "<", ">"}) {
        if (take(o)) {
          op = o;
          break;
        }
      }
      if (op.empty()) return l;
      KILN_ASSIGN_OR_RETURN(std::string r, additive());
      l = "(((" + l + ") " + op + " (" + r + ")) ? 1.0 : 0.0)";
    }
  }
  Result<std::string> additive() {
    KILN_ASSIGN_OR_RETURN(std::string l, multiplicative());
    while (true) {
      const char* op = take("+") ? "+" : take("-") ? "-" : nullptr;
      if (!op) return l;
      KILN_ASSIGN_OR_RETURN(std::string r, multiplicative());
      l = "(" + l + " " + op + " " + r + ")";
    }
  }
  Result<std::string> multiplicative() {
    KILN_ASSIGN_OR_RETURN(std::string l, unary());
    while (true) {
      const char* op = take("*") ? "*" : take("/") ? "/" : nullptr;
      if (!op) return l;
      KILN_ASSIGN_OR_RETURN(std::string r, unary());
      l = "(" + l + " " + op + " " + r + ")";
    }
  }
  // muparser binds a sign looser than ^: -2^2 is -4.
  Result<std::string> unary() {
    if (take("-")) {
      KILN_ASSIGN_OR_RETURN(std::string e, unary());
      return "(-" + e + ")";
    }
    if (take("+")) return unary();
    return power();
  }
  Result<std::string> power() {
    KILN_ASSIGN_OR_RETURN(std::string base, primary());
    if (!take("^")) return base;
    KILN_ASSIGN_OR_RETURN(std::string exponent, unary());
    return "std::pow(" + base + ", " + exponent + ")";
  }
  Result<std::string> primary() {
    const Token tok = peek();
    if (tok.kind == Token::kNumber) {
      ++pos_;
      std::string n = tok.text;
      if (n.find_first_of(".eE") == std::string::npos) n += ".0";
      if (n.front() == '.') n = "0" + n;
      return "(" + n + ")";
    }
    if (take("(")) {
      KILN_ASSIGN_OR_RETURN(std::string e, ternary());
      if (!take(")")) return invalid_argument("missing ')'");
      return "(" + e + ")";
    }
    if (tok.kind != Token::kName) {
      return invalid_argument(tok.kind == Token::kEnd ? "unexpected end"
                                                      : "unexpected '" + tok.text + "'");
    }
    ++pos_;
    if (!take("(")) {
      auto it = names_.find(tok.text);
      if (it == names_.end()) return invalid_argument("unknown name '" + tok.text + "'");
      return "(" + it->second + ")";
    }
    std::vector<std::string> args;
    if (!take(")")) {
      while (true) {
        KILN_ASSIGN_OR_RETURN(std::string a, ternary());
        args.push_back(std::move(a));
        if (take(")")) break;
        if (!take(",")) return invalid_argument("expected ',' or ')' in the call of " + tok.text);
      }
    }
    return call(tok.text, args);
  }

  Result<std::string> call(const std::string& f, const std::vector<std::string>& args) {
    // muparser's own functions (its log is the natural one, its rint rounds halves up) and kiln's.
    static const std::map<std::string, std::string> kUnary = {
        {"sin", "std::sin"},     {"cos", "std::cos"},     {"tan", "std::tan"},
        {"asin", "std::asin"},   {"acos", "std::acos"},   {"atan", "std::atan"},
        {"sinh", "std::sinh"},   {"cosh", "std::cosh"},   {"tanh", "std::tanh"},
        {"asinh", "std::asinh"}, {"acosh", "std::acosh"}, {"atanh", "std::atanh"},
        {"log2", "std::log2"},   {"log10", "std::log10"}, {"log", "std::log"},
        {"ln", "std::log"},      {"exp", "std::exp"},     {"sqrt", "std::sqrt"},
        {"rint", "kiln_rint"},   {"abs", "std::fabs"},    {"sign", "kiln_sign"},
        {"pow2", "kiln_pow2"}};
    static const std::map<std::string, std::string> kBinary = {{"cdiv", "kiln_cdiv"},
                                                               {"idiv", "kiln_idiv"}};
    auto arity = [&](size_t n) -> Status {
      if (args.size() == n) return Status::ok();
      return invalid_argument(f + "() takes " + std::to_string(n) + " argument(s), not " +
                              std::to_string(args.size()));
    };
    if (auto it = kUnary.find(f); it != kUnary.end()) {
      KILN_RETURN_IF_ERROR(arity(1));
      return it->second + "(" + args[0] + ")";
    }
    if (auto it = kBinary.find(f); it != kBinary.end()) {
      KILN_RETURN_IF_ERROR(arity(2));
      return it->second + "(" + args[0] + ", " + args[1] + ")";
    }
    if (f == "min" || f == "max" || f == "sum" || f == "avg") {
      if (args.empty()) return invalid_argument(f + "() needs at least one argument");
      std::string acc = args[0];
      for (size_t i = 1; i < args.size(); ++i) {
        acc = f == "min"   ? "kiln_min(" + acc + ", " + args[i] + ")"
              : f == "max" ? "kiln_max(" + acc + ", " + args[i] + ")"
                           : "(" + acc + " + " + args[i] + ")";
      }
      if (f == "avg") acc = "(" + acc + " / " + std::to_string(args.size()) + ".0)";
      return acc;
    }
    return invalid_argument("function '" + f + "' cannot be exported");
  }

  std::vector<Token> t_;
  const CppNames& names_;
  size_t pos_ = 0;
};

}  // namespace

Result<std::string> expr_to_cpp(const std::string& expr, const CppNames& names) {
  Result<std::vector<Token>> tokens = tokenize(expr);
  Result<std::string> out = tokens.is_ok() ? Parser(std::move(*tokens), names).whole()
                                           : Result<std::string>(tokens.status());
  if (!out.is_ok()) return invalid_argument("expression '" + expr + "': " + out.status().message());
  return out;
}

std::string cpp_expr_helpers() {
  return R"(#include <cmath>
#include <limits>
// Target expressions are evaluated in double, with kiln's cdiv (ceiling), idiv (floor) and pow2.
[[maybe_unused]] static inline double kiln_cdiv(double a, double b) {
  return b == 0 ? std::numeric_limits<double>::quiet_NaN() : std::ceil(a / b);
}
[[maybe_unused]] static inline double kiln_idiv(double a, double b) {
  return b == 0 ? std::numeric_limits<double>::quiet_NaN() : std::floor(a / b);
}
[[maybe_unused]] static inline double kiln_pow2(double x) { return std::exp2(x); }
[[maybe_unused]] static inline double kiln_min(double a, double b) { return a < b ? a : b; }
[[maybe_unused]] static inline double kiln_max(double a, double b) { return a > b ? a : b; }
[[maybe_unused]] static inline double kiln_rint(double x) { return std::floor(x + 0.5); }
[[maybe_unused]] static inline double kiln_sign(double x) { return x > 0 ? 1.0 : (x < 0 ? -1.0 : 0.0); }
)";
}

}  // namespace kiln::exporter
