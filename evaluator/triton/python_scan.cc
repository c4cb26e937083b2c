// The Triton source scan: a tokenizer that keeps identifiers, dots, commas and statement
// boundaries (comments and plain string contents dropped), then rules over the tokens.
#include "evaluator/triton/python_scan.h"

#include <cctype>
#include <set>
#include <string>

namespace kiln::eval {
namespace {

// Names that reach the interpreter's machinery: imports by another route, code from text, files,
// and attribute access by name (which would walk around the dunder rule).
const std::set<std::string, std::less<>> kBannedNames = {
    "exec",    "eval",    "compile",    "open",  "globals",    "locals", "vars", "getattr",
    "setattr", "delattr", "breakpoint", "input", "memoryview", "help",   "exit", "quit"};

bool allowed_module(std::string_view m) {
  return m == "math" || m == "triton" || m.rfind("triton.", 0) == 0;
}

struct Token {
  enum Kind { kName, kPunct, kEnd } kind;  // kEnd: end of a logical line (newline or ';')
  std::string text;
  int line;
};

std::string excerpt_of(std::string_view source, int line) {
  int at = 1;
  size_t begin = 0;
  while (at < line && begin < source.size()) {
    const size_t nl = source.find('\n', begin);
    if (nl == std::string_view::npos) return "";
    begin = nl + 1;
    ++at;
  }
  std::string_view l = source.substr(begin, source.find('\n', begin) - begin);
  while (!l.empty() && std::isspace(static_cast<unsigned char>(l.front()))) l.remove_prefix(1);
  while (!l.empty() && std::isspace(static_cast<unsigned char>(l.back()))) l.remove_suffix(1);
  return std::string(l.substr(0, 160));
}

class Tokenizer {
 public:
  explicit Tokenizer(std::string_view s) : s_(s) {}

  // False on an unterminated string (the finding's line in *bad_line).
  bool run(std::vector<Token>* out, int* bad_line) {
    int depth = 0;  // brackets: newlines inside them do not end the statement
    while (i_ < s_.size()) {
      const char c = s_[i_];
      if (c == '#') {
        while (i_ < s_.size() && s_[i_] != '\n') ++i_;
      } else if (c == '\n') {
        if (depth == 0) out->push_back({Token::kEnd, "", line_});
        ++line_;
        ++i_;
      } else if (c == '\\' && i_ + 1 < s_.size() && s_[i_ + 1] == '\n') {
        i_ += 2;
        ++line_;
      } else if (c == '"' || c == '\'') {
        if (!string_literal("", out, bad_line)) return false;
      } else if (std::isalpha(static_cast<unsigned char>(c)) || c == '_' ||
                 static_cast<unsigned char>(c) >= 0x80) {
        size_t e = i_;
        while (e < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[e])) || s_[e] == '_' ||
                                 static_cast<unsigned char>(s_[e]) >= 0x80)) {
          ++e;
        }
        std::string word(s_.substr(i_, e - i_));
        i_ = e;
        if (i_ < s_.size() && (s_[i_] == '"' || s_[i_] == '\'') && word.size() <= 2 &&
            word.find_first_not_of("rRbBuUfF") == std::string::npos) {
          if (!string_literal(word, out, bad_line)) return false;
        } else {
          out->push_back({Token::kName, std::move(word), line_});
        }
      } else {
        if (c == '(' || c == '[' || c == '{') ++depth;
        if ((c == ')' || c == ']' || c == '}') && depth > 0) --depth;
        if (c == ';' && depth == 0) {
          out->push_back({Token::kEnd, "", line_});
        } else if (!std::isspace(static_cast<unsigned char>(c))) {
          out->push_back({Token::kPunct, std::string(1, c), line_});
        }
        ++i_;
      }
    }
    out->push_back({Token::kEnd, "", line_});
    return true;
  }

 private:
  // At the opening quote; `prefix` as written. An f-string's text is tokenized as code (its
  // {expressions} are evaluated), other contents are dropped.
  bool string_literal(const std::string& prefix, std::vector<Token>* out, int* bad_line) {
    const bool raw = prefix.find_first_of("rR") != std::string::npos;
    const bool f = prefix.find_first_of("fF") != std::string::npos;
    const char q = s_[i_];
    const bool triple = s_.substr(i_, 3) == std::string(3, q);
    const int start_line = line_;
    i_ += triple ? 3 : 1;
    const size_t begin = i_;
    for (;;) {
      if (i_ >= s_.size() || (!triple && s_[i_] == '\n')) {
        *bad_line = start_line;
        return false;
      }
      if (s_[i_] == '\\' && !raw && i_ + 1 < s_.size()) {
        if (s_[i_ + 1] == '\n') ++line_;
        i_ += 2;
        continue;
      }
      if (s_[i_] == q && (!triple || s_.substr(i_, 3) == std::string(3, q))) break;
      if (s_[i_] == '\n') ++line_;
      ++i_;
    }
    if (f) {
      std::vector<Token> inner;
      Tokenizer t(s_.substr(begin, i_ - begin));
      int ignored = 0;
      t.line_ = start_line;
      t.run(&inner, &ignored);  // an unbalanced quote inside is read as far as it goes
      for (Token& tok : inner) {
        if (tok.kind != Token::kEnd) out->push_back(std::move(tok));
      }
    }
    i_ += triple ? 3 : 1;
    return true;
  }

  std::string_view s_;
  size_t i_ = 0;
  int line_ = 1;
};

}  // namespace

std::vector<ScanFinding> scan_python(std::string_view source) {
  std::vector<ScanFinding> findings;
  std::set<std::pair<std::string, int>> seen;
  auto add = [&](std::string rule, int line) {
    if (seen.emplace(rule, line).second) {
      findings.push_back({std::move(rule), line, excerpt_of(source, line)});
    }
  };
  std::vector<Token> tokens;
  int bad_line = 0;
  if (!Tokenizer(source).run(&tokens, &bad_line)) {
    add("syntax:unterminated-string", bad_line);
    return findings;
  }
  // A dotted name from tokens[*k] on ("a.b.c"), leaving *k after it.
  auto dotted = [&](size_t* k) {
    std::string name;
    while (*k < tokens.size()) {
      const Token& t = tokens[*k];
      if (t.kind == Token::kName && (name.empty() || name.back() == '.')) {
        name += t.text;
      } else if (t.kind == Token::kPunct && t.text == ".") {
        name += '.';
      } else {
        break;
      }
      ++*k;
    }
    return name;
  };
  bool statement_start = true;
  for (size_t k = 0; k < tokens.size(); ++k) {
    const Token& t = tokens[k];
    if (t.kind == Token::kEnd) {
      statement_start = true;
      continue;
    }
    const bool at_start = statement_start;
    statement_start = false;
    if (t.kind != Token::kName) continue;
    if (at_start && t.text == "import") {
      // import a.b [as c], d ...
      size_t j = k + 1;
      for (;;) {
        const std::string m = dotted(&j);
        if (!allowed_module(m)) add("import:" + (m.empty() ? std::string("?") : m), t.line);
        if (j < tokens.size() && tokens[j].kind == Token::kName && tokens[j].text == "as") j += 2;
        if (j < tokens.size() && tokens[j].kind == Token::kPunct && tokens[j].text == ",") {
          ++j;
          continue;
        }
        break;
      }
      k = j - 1;
      continue;
    }
    if (at_start && t.text == "from") {
      size_t j = k + 1;
      const std::string m = dotted(&j);
      if (!allowed_module(m) || m.front() == '.') {
        add("import:" + (m.empty() ? std::string("?") : m), t.line);
      }
      k = j - 1;
      continue;
    }
    if (kBannedNames.count(t.text)) add("identifier:" + t.text, t.line);
    if (t.text.size() > 4 && t.text.rfind("__", 0) == 0 &&
        t.text.compare(t.text.size() - 2, 2, "__") == 0) {
      add("identifier:" + t.text, t.line);
    }
  }
  return findings;
}

}  // namespace kiln::eval
