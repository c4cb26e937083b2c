// Scans of what the compilers make of a candidate: the cpu compiler's preprocessed source (the
// candidate's own lines, macros expanded) and NVRTC's PTX (clock reads, external functions).
#include <algorithm>
#include <cctype>
#include <map>
#include <set>
#include <string>
#include <utility>

#include "evaluator/source_lex.h"
#include "evaluator/source_scan.h"

namespace kiln::eval {
namespace {

constexpr size_t kMaxExcerptChars = 160;

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

std::string excerpt(std::string_view line) {
  return std::string(trim(line).substr(0, kMaxExcerptChars));
}

std::string_view base_name(std::string_view path) {
  size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

// The lines of `text`, without their '\n'.
std::vector<std::string_view> split_lines(std::string_view text) {
  std::vector<std::string_view> lines;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = std::min(text.find('\n', start), text.size());
    lines.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return lines;
}

// A line marker of the preprocessor's output: `# 12 "file" 1 3` (GCC, clang) or `#line 12 "file"`.
struct LineMarker {
  int line = 0;
  std::string file;     // empty when the marker names none
  bool enters = false;  // flag 1: the start of an included file
  bool leaves = false;  // flag 2: back in the includer
};

bool parse_line_marker(std::string_view s, LineMarker* out) {
  size_t p = 0;
  auto skip_space = [&] {
    while (p < s.size() && (s[p] == ' ' || s[p] == '\t')) ++p;
  };
  skip_space();
  if (p >= s.size() || s[p] != '#') return false;
  ++p;
  skip_space();
  if (s.compare(p, 4, "line") == 0) p += 4;
  skip_space();
  if (p >= s.size() || !std::isdigit(static_cast<unsigned char>(s[p]))) return false;
  *out = {};
  long line = 0;
  while (p < s.size() && std::isdigit(static_cast<unsigned char>(s[p]))) {
    line = std::min(line * 10 + (s[p++] - '0'), 1L << 30);
  }
  out->line = static_cast<int>(line);
  skip_space();
  if (p < s.size() && s[p] == '"') {
    for (++p; p < s.size() && s[p] != '"'; ++p) {
      if (s[p] == '\\' && p + 1 < s.size()) ++p;  // GCC writes \\ and \" in names
      out->file += s[p];
    }
    ++p;
  }
  while (p < s.size()) {
    skip_space();
    if (p < s.size() && s[p] == '1') out->enters = true;
    if (p < s.size() && s[p] == '2') out->leaves = true;
    while (p < s.size() && s[p] != ' ' && s[p] != '\t') ++p;
  }
  return true;
}

// The candidate's own lines of the preprocessed output: text[k] came from line line_of[k].
struct CandidateLines {
  bool found = false;
  std::vector<std::string> text;
  std::vector<int> line_of;
};

CandidateLines candidate_lines(std::string_view preprocessed, std::string_view candidate_file) {
  CandidateLines out;
  const std::string_view wanted = base_name(candidate_file);
  int depth = 0;          // include depth: the compiled unit is 0
  int region_depth = -1;  // the candidate file's depth while inside it
  int line = 0;           // the source line of the next output line
  bool last_was_directive = false;
  for (std::string_view raw : split_lines(preprocessed)) {
    LineMarker m;
    if (parse_line_marker(raw, &m)) {
      if (m.enters) {
        ++depth;
        // The unit includes the candidate's file directly; anything deeper is a header.
        if (!out.found && depth == 1 && base_name(m.file) == wanted) {
          out.found = true;
          region_depth = depth;
        }
      }
      if (m.leaves) {
        depth = std::max(0, depth - 1);
        if (depth < region_depth) region_depth = -2;  // left the candidate's file: done
      }
      line = m.line;
      continue;
    }
    const int this_line = line++;
    if (depth != region_depth || trim(raw).empty()) continue;
    // A macro from a header splits one source line into several output lines, under markers
    // that repeat the line number: rejoined so that a call stays with its arguments. Directives
    // (#pragma, from _Pragma too) keep a line of their own so that they are checked as such.
    const bool directive = trim(raw).front() == '#';
    if (!out.text.empty() && out.line_of.back() == this_line && !directive && !last_was_directive) {
      out.text.back() += ' ';
      out.text.back() += trim(raw);
    } else {
      out.text.emplace_back(raw);
      out.line_of.push_back(this_line);
    }
    last_was_directive = directive;
  }
  return out;
}

bool is_ptx_ident_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '$';
}

// `ptx` with // and /* */ comments blanked (newlines kept), quoted strings left alone.
std::string blank_ptx_comments(std::string_view ptx) {
  std::string out(ptx);
  size_t i = 0;
  while (i < out.size()) {
    if (out[i] == '"') {
      size_t e = out.find_first_of("\"\n", i + 1);
      i = e == std::string::npos ? out.size() : e + 1;
    } else if (out.compare(i, 2, "//") == 0) {
      size_t e = std::min(out.find('\n', i), out.size());
      std::fill(out.begin() + static_cast<long>(i), out.begin() + static_cast<long>(e), ' ');
      i = e;
    } else if (out.compare(i, 2, "/*") == 0) {
      size_t e = out.find("*/", i + 2);
      e = e == std::string::npos ? out.size() : e + 2;
      for (size_t k = i; k < e; ++k) {
        if (out[k] != '\n') out[k] = ' ';
      }
      i = e;
    } else {
      ++i;
    }
  }
  return out;
}

// Past the balanced parentheses that open at `i` (or `i` itself when none opens there).
size_t skip_parens(const std::string& t, size_t i) {
  if (i >= t.size() || t[i] != '(') return i;
  int open = 0;
  for (; i < t.size(); ++i) {
    if (t[i] == '(') ++open;
    if (t[i] == ')' && --open == 0) return i + 1;
  }
  return i;
}

size_t skip_ws(const std::string& t, size_t i) {
  while (i < t.size() && std::isspace(static_cast<unsigned char>(t[i]))) ++i;
  return i;
}

// The names of the functions declared `.extern .func` in `t` (comments blanked), in order; "?"
// for a declaration whose name cannot be read.
std::vector<std::pair<std::string, size_t>> extern_functions(const std::string& t) {
  std::vector<std::pair<std::string, size_t>> out;
  for (size_t at = t.find(".extern"); at != std::string::npos; at = t.find(".extern", at + 1)) {
    size_t p = skip_ws(t, at + 7);
    if (t.compare(p, 5, ".func") != 0 || (p + 5 < t.size() && is_ptx_ident_char(t[p + 5]))) {
      continue;  // .extern .shared (dynamic shared memory) and the like
    }
    p = skip_ws(t, p + 5);
    while (t.compare(p, 10, ".attribute") == 0) p = skip_ws(t, skip_parens(t, skip_ws(t, p + 10)));
    p = skip_ws(t, skip_parens(t, p));  // the return parameters
    size_t e = p;
    while (e < t.size() && (is_ptx_ident_char(t[e]) || (e == p && t[e] == '%'))) ++e;  // %name too
    out.emplace_back(e > p ? t.substr(p, e - p) : "?", at);
  }
  return out;
}

// The ids of `.file` directives that name `source_name` (NVRTC writes it under its working
// directory: "/some/dir/kernel.cu").
std::set<std::string> source_file_ids(const std::vector<std::string_view>& lines,
                                      std::string_view source_name) {
  std::set<std::string> ids;
  for (std::string_view raw : lines) {
    std::string_view l = trim(raw);
    if (l.rfind(".file", 0) != 0) continue;
    size_t q = l.find('"');
    size_t q2 = q == std::string_view::npos ? q : l.find('"', q + 1);
    if (q2 == std::string_view::npos) continue;
    std::string_view name = l.substr(q + 1, q2 - q - 1);
    if (name == source_name || base_name(name) == source_name) {
      ids.insert(std::string(trim(l.substr(5, q - 5))));
    }
  }
  return ids;
}

// The source line a `.loc` line points at in one of `ids` (directly or through inlined_at), or
// -1 when it points elsewhere.
int loc_line(std::string_view l, const std::set<std::string>& ids) {
  auto file_and_line = [&](std::string_view s) -> int {
    size_t a = s.find_first_not_of(" \t");
    if (a == std::string_view::npos) return -1;
    size_t b = s.find_first_of(" \t", a);
    if (b == std::string_view::npos || !ids.count(std::string(s.substr(a, b - a)))) return -1;
    size_t c = s.find_first_not_of(" \t", b);
    if (c == std::string_view::npos || !std::isdigit(static_cast<unsigned char>(s[c]))) return -1;
    int n = 0;
    for (; c < s.size() && std::isdigit(static_cast<unsigned char>(s[c])) && n < (1 << 24); ++c) {
      n = n * 10 + (s[c] - '0');
    }
    return n;
  };
  int direct = file_and_line(l.substr(4));
  if (direct >= 0) return direct;
  size_t inlined = l.find("inlined_at");
  return inlined == std::string_view::npos ? -1 : file_and_line(l.substr(inlined + 10));
}

}  // namespace

std::vector<ScanFinding> scan_preprocessed(std::string_view preprocessed,
                                           std::string_view candidate_file) {
  CandidateLines own = candidate_lines(preprocessed, candidate_file);
  if (!own.found) {
    return {{"preprocessed:no-candidate-lines", 0,
             "the preprocessor's output has no line of " + std::string(base_name(candidate_file))}};
  }
  std::string text;
  for (const std::string& l : own.text) text += l + "\n";
  std::vector<ScanFinding> findings = scan_source(text, "cpu");
  for (ScanFinding& f : findings) {
    size_t k = static_cast<size_t>(f.line) - 1;
    f.line = f.line >= 1 && k < own.line_of.size() ? own.line_of[k] : 0;
  }
  return findings;
}

std::vector<ScanFinding> scan_ptx(std::string_view ptx, std::string_view source_name) {
  static const std::set<std::string> kAllowedExterns = {"vprintf", "__assertfail"};
  const std::string code = blank_ptx_comments(ptx);
  const std::vector<std::string_view> raw_lines = split_lines(ptx);
  const std::vector<std::string_view> lines = split_lines(code);
  const std::set<std::string> ids = source_file_ids(raw_lines, source_name);

  // Offsets of line starts, to name the line of an offset into `code`.
  std::vector<size_t> starts;
  for (size_t s = 0; s < code.size(); s = std::min(code.find('\n', s), code.size()) + 1) {
    starts.push_back(s);
  }
  auto line_index = [&](size_t offset) {
    auto after = std::upper_bound(starts.begin(), starts.end(), offset);
    return static_cast<size_t>(after - starts.begin()) - 1;
  };
  std::map<std::string, size_t> banned_externs;  // name -> index of its declaration's line
  for (const auto& [name, at] : extern_functions(code)) {
    if (!kAllowedExterns.count(name)) banned_externs.emplace(name, line_index(at));
  }

  std::vector<ScanFinding> findings;
  std::set<std::pair<std::string, int>> seen;
  std::map<std::string, size_t> extern_finding;  // name -> index into findings
  auto add = [&](std::string rule, int line, std::string_view text) {
    if (!seen.insert({rule, line}).second) return;
    findings.push_back({std::move(rule), line, excerpt(text)});
  };
  for (const auto& [name, decl] : banned_externs) {
    extern_finding[name] = findings.size();
    add("ptx:extern-function:" + name, 0, raw_lines[decl]);
  }
  int line = 0;
  for (size_t k = 0; k < lines.size(); ++k) {
    std::string_view l = lines[k];
    std::string_view t = trim(l);
    if (t.rfind(".loc", 0) == 0 && t.size() > 4 && !is_ptx_ident_char(t[4])) {
      if (int at = loc_line(t, ids); at >= 0) line = at;
      continue;
    }
    // NVVM writes no preprocessor lines, and today's ptxas rejects them; one that took them could
    // paste a register's name together (#define T(a, b) a##b), so inline asm may not bring any.
    if (!t.empty() && t.front() == '#') add("ptx:directive", line, raw_lines[k]);
    for (size_t i = 0; i < l.size(); ++i) {
      if (!is_ptx_ident_char(l[i]) || (i > 0 && is_ptx_ident_char(l[i - 1]))) continue;
      size_t e = i;
      while (e < l.size() && is_ptx_ident_char(l[e])) ++e;
      std::string word(l.substr(i, e - i));
      if (i > 0 && l[i - 1] == '%' && scan_detail::is_timer_register(word)) {
        add("ptx:%" + word, line, raw_lines[k]);
      }
      // The first mention of a banned external function under a .loc of the program (its call,
      // or a declaration in inline asm) names the source line it came from.
      auto ext = extern_finding.find(word);
      if (ext != extern_finding.end() && line > 0 && findings[ext->second].line == 0) {
        findings[ext->second].line = line;
      }
      i = e - 1;
    }
  }
  std::stable_sort(findings.begin(), findings.end(),
                   [](const ScanFinding& a, const ScanFinding& b) { return a.line < b.line; });
  return findings;
}

std::string refusal_log(std::string_view what, const std::vector<ScanFinding>& findings) {
  constexpr size_t kMaxLines = 10;
  std::string log;
  for (size_t i = 0; i < findings.size() && i < kMaxLines; ++i) {
    const ScanFinding& f = findings[i];
    log += "kiln: " + std::string(what) + ": " + f.rule +
           (f.line > 0 ? " at line " + std::to_string(f.line) : std::string()) + ": " + f.excerpt +
           "\n";
  }
  if (findings.size() > kMaxLines) {
    log += "kiln: " + std::string(what) + ": " + std::to_string(findings.size() - kMaxLines) +
           " more findings\n";
  }
  return log;
}

}  // namespace kiln::eval
