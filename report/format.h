// Text helpers the report's renderers share: numbers with their units as a reader wants them
// (times in ns/µs/ms/s, rates in GB/s or TFLOP/s, durations in s/min/h), and the escaping each
// output format needs (XML for the HTML page, table cells for markdown, a shell word for commands
// the reader copies).
#pragma once

#include <map>
#include <string>
#include <string_view>

namespace kiln::report {

// What a number measures; picks the unit prefixes of its text.
enum class Unit {
  kPlain,           // a count or a ratio: 12, 0.5, 1.2k
  kMicroseconds,    // a kernel time, given in µs: "850 ns", "12.5 µs", "3.2 ms"
  kSeconds,         // a duration, given in s: "45 s", "12.5 min", "2.1 h"
  kBytesPerSecond,  // "850 GB/s", "3.35 TB/s"
  kFlopsPerSecond,  // "120 GFLOP/s", "989 TFLOP/s"
};

// A unit prefix: divide a value by `divisor` and write `suffix` after it ("µs" for 1e3 ns...).
struct Scaled {
  double divisor = 1;
  std::string suffix;
};

// The prefix that suits `magnitude` (the largest absolute value to be shown) for `unit`.
Scaled scale_for(Unit unit, double magnitude);

// A number with at most `digits` significant digits and no trailing zeros: 12.5, 3, 0.25.
std::string number(double v, int digits = 3);

// `v` in `unit` with the prefix that suits its own magnitude: "12.5 µs", "3.35 TB/s".
std::string with_unit(double v, Unit unit, int digits = 3);

// A ratio as a speedup: "2.31x" ("-" when not finite or not positive).
// A time given in microseconds with its unit ("49.8 µs", "1.2 ms"); "-" for none.
std::string time_us(double us);
std::string speedup(double ratio);

// A fraction as a percentage: "37%" or "0.36%" for small ones ("-" when not positive).
std::string percent(double fraction);

// A US dollar amount: "$0.0123", "$12.40".
std::string dollars(double usd);

// Escapes text for XML and HTML (element content and attribute values alike).
std::string xml_escape(std::string_view text);

// Escapes text for one markdown table cell: pipes, newlines, backticks and angle brackets.
std::string md_cell(std::string_view text);

// One shell word: unchanged when it is made of safe characters, else in single quotes.
std::string shell_word(std::string_view text);

// The first line of `text`, cut to `max_chars` (with "..." when cut).
std::string first_line(std::string_view text, size_t max_chars);

// "BLOCK=256 VEC=8" ("-" when empty).
std::string params_text(const std::map<std::string, std::string>& params);

}  // namespace kiln::report
