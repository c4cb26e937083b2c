// The small C/C++ lexer under kiln's static scans (source_scan.cc, compiled_scan.cc): line
// splicing, two views of the text with comments (and literals) blanked, where each string literal
// is, and runs of adjacent string literals joined as the compiler joins them. Internal to the
// scans.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::eval::scan_detail {

bool is_ident_start(char c);  // letters, '_' and bytes >= 0x80 (UTF-8 identifiers, as GCC takes)
bool is_ident_char(char c);
bool is_space(char c);  // horizontal white space: not '\n'

// Translation phase 2: backslash-newline pairs are removed, so "dl\<newline>open" is scanned as
// the identifier the compiler sees. line_of[i] is the original 1-based line of text[i].
struct SplicedText {
  std::string text;
  std::vector<int> line_of;
};
SplicedText splice_lines(std::string_view src);

// A string literal of the spliced text: [begin, end) from its encoding prefix (u8, L, R...) to one
// past the closing quote, [content_begin, content_end) between the quotes (raw: the delimiters'
// parentheses excluded).
struct StringLiteral {
  size_t begin = 0;
  size_t end = 0;
  size_t content_begin = 0;
  size_t content_end = 0;
  bool raw = false;
};

// Two views of the spliced text, both of its length, so positions and line numbers carry over.
struct Views {
  std::string code;        // comments and literals (quotes included) blanked
  std::string directives;  // comments blanked, literals kept: #include targets, inline PTX text
  std::vector<StringLiteral> strings;  // in order; character literals are not listed
};
Views lex(const std::string& spliced);

// One past the end of the preprocessing number starting at `i` (digits, letters, '.', digit
// separators and exponent signs), so that 1'000 does not open a character literal.
size_t pp_number_end(const std::string& t, size_t i);

// A run of string literals with nothing but white space (or comments) between them, joined as
// translation phase 6 joins them, with escape sequences decoded ("%%global" "\x74imer;" is
// "%%globaltimer;"). pos[k] is the position in the spliced text that text[k] came from.
struct JoinedString {
  std::string text;
  std::vector<size_t> pos;
};
std::vector<JoinedString> join_adjacent_strings(const std::string& spliced, const Views& views);

// Whether `name` (without its '%') is a PTX special register that reads a clock or a counter:
// globaltimer, globaltimer_lo/_hi, clock, clock_hi, clock64 and the performance monitors
// pm0..pm7 and pm0_64..pm7_64.
bool is_timer_register(std::string_view name);

}  // namespace kiln::eval::scan_detail
