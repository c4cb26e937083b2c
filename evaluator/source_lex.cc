// The scans' lexer: splicing, comment and literal blanking, string-literal joining.
#include "evaluator/source_lex.h"

#include <algorithm>
#include <cctype>

namespace kiln::eval::scan_detail {
namespace {

constexpr size_t kMaxRawDelimiterChars = 16;  // the standard's limit on R"delim( )delim"

void blank(std::string& s, size_t from, size_t to) {
  for (size_t k = from; k < to && k < s.size(); ++k) {
    if (s[k] != '\n') s[k] = ' ';
  }
}

// One past the closing quote of the literal opened at `open`; at an unterminated literal, the end
// of its line (the compiler rejects it; the scan must just not swallow the rest of the file).
size_t quoted_end(const std::string& t, size_t open) {
  size_t i = open + 1;
  while (i < t.size() && t[i] != '\n') {
    if (t[i] == '\\') {
      i += 2;
      continue;
    }
    if (t[i] == t[open]) return i + 1;
    ++i;
  }
  return std::min(i, t.size());
}

// The string literal whose opening quote is at `quote` (its prefix starting at `begin`).
StringLiteral quoted_string(const std::string& t, size_t begin, size_t quote) {
  size_t end = quoted_end(t, quote);
  bool closed = end > quote + 1 && t[end - 1] == '"';
  return {begin, end, quote + 1, closed ? end - 1 : end, false};
}

// The raw string whose quote is at `quote`; false when what follows is not a valid raw-string
// opening (then the quote starts an ordinary string).
bool raw_string(const std::string& t, size_t begin, size_t quote, StringLiteral* out) {
  size_t paren = t.find('(', quote + 1);
  if (paren == std::string::npos || paren - quote - 1 > kMaxRawDelimiterChars) return false;
  std::string delim = t.substr(quote + 1, paren - quote - 1);
  for (char c : delim) {
    if (is_space(c) || c == '\n' || c == ')' || c == '\\' || c == '"') return false;
  }
  std::string close = ")" + delim + "\"";
  size_t at = t.find(close, paren + 1);
  if (at == std::string::npos) {
    *out = {begin, t.size(), paren + 1, t.size(), true};
  } else {
    *out = {begin, at + close.size(), paren + 1, at, true};
  }
  return true;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Appends the characters of `s` (an ordinary literal's content) to `out`, escapes decoded. A
// character outside ASCII from \x, \u or \U becomes '?': no banned name needs one.
void append_decoded(const std::string& t, const StringLiteral& s, JoinedString* out) {
  auto put = [&](unsigned long value, size_t from) {
    out->text += value < 0x80 ? static_cast<char>(value) : '?';
    out->pos.push_back(from);
  };
  size_t i = s.content_begin;
  while (i < s.content_end) {
    if (t[i] != '\\' || i + 1 >= s.content_end) {
      out->text += t[i];
      out->pos.push_back(i);
      ++i;
      continue;
    }
    const size_t from = i;
    const char e = t[i + 1];
    i += 2;
    if (e >= '0' && e <= '7') {
      unsigned long v = static_cast<unsigned long>(e - '0');
      for (int k = 0; k < 2 && i < s.content_end && t[i] >= '0' && t[i] <= '7'; ++k, ++i) {
        v = v * 8 + static_cast<unsigned long>(t[i] - '0');
      }
      put(v & 0xff, from);
    } else if (e == 'x' || e == 'u' || e == 'U') {
      size_t max_digits = e == 'x' ? std::string::npos : e == 'u' ? 4 : 8;
      unsigned long v = 0;
      for (size_t k = 0; k < max_digits && i < s.content_end && hex_value(t[i]) >= 0; ++k, ++i) {
        v = (v << 4 | static_cast<unsigned long>(hex_value(t[i]))) & 0xffffffffUL;
      }
      put(v, from);
    } else {
      constexpr std::string_view kFrom = "ntrabfv", kTo = "\n\t\r\a\b\f\v";
      size_t k = kFrom.find(e);
      put(static_cast<unsigned char>(k == std::string_view::npos ? e : kTo[k]), from);
    }
  }
}

}  // namespace

bool is_ident_start(char c) {
  return std::isalpha(static_cast<unsigned char>(c)) || c == '_' ||
         static_cast<unsigned char>(c) >= 0x80;
}
bool is_ident_char(char c) {
  return is_ident_start(c) || std::isdigit(static_cast<unsigned char>(c));
}
bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v'; }

SplicedText splice_lines(std::string_view src) {
  SplicedText out;
  out.text.reserve(src.size());
  out.line_of.reserve(src.size());
  int line = 1;
  for (size_t i = 0; i < src.size(); ++i) {
    if (src[i] == '\\') {
      size_t j = i + 1;
      while (j < src.size() && is_space(src[j])) ++j;  // GCC splices "\ <newline>" too
      if (j < src.size() && src[j] == '\n') {
        ++line;
        i = j;
        continue;
      }
    }
    out.text += src[i];
    out.line_of.push_back(line);
    if (src[i] == '\n') ++line;
  }
  return out;
}

size_t pp_number_end(const std::string& t, size_t i) {
  for (++i; i < t.size(); ++i) {
    char c = t[i], prev = t[i - 1];
    bool exponent_sign =
        (c == '+' || c == '-') && (prev == 'e' || prev == 'E' || prev == 'p' || prev == 'P');
    if (c == '\'' && i + 1 < t.size() && is_ident_char(t[i + 1])) continue;
    if (!(is_ident_char(c) || c == '.' || exponent_sign)) break;
  }
  return i;
}

Views lex(const std::string& t) {
  Views v{t, t, {}};
  const size_t n = t.size();
  size_t i = 0;
  auto take_string = [&](const StringLiteral& s) {
    blank(v.code, s.content_begin - 1, s.end);  // from the opening quote
    v.strings.push_back(s);
    i = s.end;
  };
  while (i < n) {
    char c = t[i];
    char next = i + 1 < n ? t[i + 1] : '\0';
    if (c == '/' && next == '/') {
      size_t e = std::min(t.find('\n', i), n);
      blank(v.code, i, e);
      blank(v.directives, i, e);
      i = e;
    } else if (c == '/' && next == '*') {
      size_t e = t.find("*/", i + 2);
      e = e == std::string::npos ? n : e + 2;
      blank(v.code, i, e);
      blank(v.directives, i, e);
      i = e;
    } else if (c == '"') {
      take_string(quoted_string(t, i, i));
    } else if (c == '\'') {
      size_t e = quoted_end(t, i);
      blank(v.code, i, e);
      i = e;
    } else if (is_ident_start(c)) {
      size_t e = i;
      while (e < n && is_ident_char(t[e])) ++e;
      std::string_view id(t.data() + i, e - i);
      bool raw_prefix = id == "R" || id == "u8R" || id == "uR" || id == "UR" || id == "LR";
      bool encoding_prefix = id == "u8" || id == "u" || id == "U" || id == "L";
      StringLiteral raw;
      if (e < n && t[e] == '"' && raw_prefix && raw_string(t, i, e, &raw)) {
        blank(v.code, e, raw.end);
        v.strings.push_back(raw);
        i = raw.end;
      } else if (e < n && t[e] == '"' && (raw_prefix || encoding_prefix)) {
        take_string(quoted_string(t, i, e));
      } else if (e < n && t[e] == '\'' && encoding_prefix) {
        size_t q = quoted_end(t, e);
        blank(v.code, e, q);
        i = q;
      } else {
        i = e;
      }
    } else if (std::isdigit(static_cast<unsigned char>(c)) ||
               (c == '.' && std::isdigit(static_cast<unsigned char>(next)))) {
      i = pp_number_end(t, i);
    } else {
      ++i;
    }
  }
  return v;
}

std::vector<JoinedString> join_adjacent_strings(const std::string& spliced, const Views& views) {
  std::vector<JoinedString> out;
  size_t previous_end = std::string::npos;
  for (const StringLiteral& s : views.strings) {
    // Only white space between: comments are blanked in `directives`, character literals are not.
    bool adjacent = previous_end != std::string::npos && !out.empty();
    for (size_t k = previous_end; adjacent && k < s.begin; ++k) {
      adjacent = is_space(views.directives[k]) || views.directives[k] == '\n';
    }
    if (!adjacent) out.emplace_back();
    if (s.raw) {
      for (size_t k = s.content_begin; k < s.content_end; ++k) {
        out.back().text += spliced[k];
        out.back().pos.push_back(k);
      }
    } else {
      append_decoded(spliced, s, &out.back());
    }
    previous_end = s.end;
  }
  return out;
}

bool is_timer_register(std::string_view name) {
  if (name == "globaltimer" || name == "globaltimer_lo" || name == "globaltimer_hi" ||
      name == "clock" || name == "clock_hi" || name == "clock64") {
    return true;
  }
  // pm0..pm7, pm0_64..pm7_64
  return (name.size() == 3 || (name.size() == 6 && name.substr(3) == "_64")) &&
         name.substr(0, 2) == "pm" && name[2] >= '0' && name[2] <= '7';
}

}  // namespace kiln::eval::scan_detail
