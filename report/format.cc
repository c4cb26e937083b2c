// Number and text formatting for the report (see format.h).
#include "report/format.h"

#include <cmath>
#include <cstdio>
#include <vector>

namespace kiln::report {
namespace {

struct Prefix {
  double divisor;
  const char* suffix;
};

// Each unit's prefixes, smallest first; a value takes the largest one it reaches.
const std::vector<Prefix>& prefixes(Unit unit) {
  static const std::vector<Prefix> plain = {{1, ""}, {1e3, "k"}, {1e6, "M"}, {1e9, "G"}};
  static const std::vector<Prefix> us = {{1e-3, "ns"}, {1, "µs"}, {1e3, "ms"}, {1e6, "s"}};
  // Durations switch to minutes only from two minutes on: "90 s" reads better than "1.5 min".
  static const std::vector<Prefix> seconds = {{1, "s"}, {60, "min"}, {3600, "h"}};
  static const std::vector<Prefix> bytes = {{1, "B/s"},    {1e3, "kB/s"},  {1e6, "MB/s"},
                                            {1e9, "GB/s"}, {1e12, "TB/s"}, {1e15, "PB/s"}};
  static const std::vector<Prefix> flops = {{1, "FLOP/s"},    {1e3, "kFLOP/s"},  {1e6, "MFLOP/s"},
                                            {1e9, "GFLOP/s"}, {1e12, "TFLOP/s"}, {1e15, "PFLOP/s"}};
  switch (unit) {
    case Unit::kMicroseconds:
      return us;
    case Unit::kSeconds:
      return seconds;
    case Unit::kBytesPerSecond:
      return bytes;
    case Unit::kFlopsPerSecond:
      return flops;
    case Unit::kPlain:
      break;
  }
  return plain;
}

}  // namespace

Scaled scale_for(Unit unit, double magnitude) {
  const std::vector<Prefix>& p = prefixes(unit);
  magnitude = std::fabs(magnitude);
  size_t pick = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    // Plain counts stay plain below 10,000 (evaluation numbers are read as whole numbers).
    double from = p[i].divisor;
    if (unit == Unit::kPlain && i > 0) from *= 10;
    if (unit == Unit::kSeconds && i > 0) from *= 2;
    if (magnitude >= from * (1 - 1e-9)) pick = i;
  }
  // Below the smallest prefix (0 ns, 0.5 B/s) the smallest one still names the unit.
  Scaled s;
  s.divisor = p[pick].divisor;
  s.suffix = p[pick].suffix;
  if (unit == Unit::kPlain) return s;
  if (!s.suffix.empty()) s.suffix = " " + s.suffix;
  return s;
}

std::string number(double v, int digits) {
  if (!std::isfinite(v)) return "-";
  if (v == 0) return "0";
  // Whole numbers of any size are written in full; a fraction keeps `digits` significant digits
  // (but never more than 4 decimals, and never the exponent form).
  const double mag = std::floor(std::log10(std::fabs(v)));
  int decimals = digits - 1 - static_cast<int>(mag);
  if (decimals < 0) decimals = 0;
  if (decimals > 4) decimals = 4;
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  std::string s = buf;
  if (s.find('.') != std::string::npos) {
    while (!s.empty() && s.back() == '0') s.pop_back();
    if (!s.empty() && s.back() == '.') s.pop_back();
  }
  if (s == "-0") s = "0";
  return s;
}

std::string with_unit(double v, Unit unit, int digits) {
  if (!std::isfinite(v)) return "-";
  const Scaled s = scale_for(unit, v);
  return number(v / s.divisor, digits) + s.suffix;
}

std::string speedup(double ratio) {
  if (!std::isfinite(ratio) || ratio <= 0) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2fx", ratio);
  return buf;
}

std::string percent(double fraction) {
  if (!std::isfinite(fraction) || fraction <= 0) return "-";
  const double pct = 100 * fraction;
  char buf[32];
  if (pct >= 10)
    std::snprintf(buf, sizeof buf, "%.0f%%", pct);
  else
    std::snprintf(buf, sizeof buf, "%s%%", number(pct, 2).c_str());
  return buf;
}

std::string dollars(double usd) {
  char buf[32];
  std::snprintf(buf, sizeof buf, usd < 1 ? "$%.4f" : "$%.2f", usd);
  return buf;
}

std::string xml_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        // Control characters are not allowed in XML (a compiler's colour codes in a log).
        if (static_cast<unsigned char>(c) < 0x20 && c != '\n' && c != '\t' && c != '\r')
          out += ' ';
        else
          out += c;
    }
  }
  return out;
}

std::string md_cell(std::string_view text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '|':
        out += "\\|";
        break;
      case '\n':
      case '\r':
        out += ' ';
        break;
      case '`':
        out += "'";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      default:
        out += c;
    }
  }
  return out.empty() ? "-" : out;
}

std::string shell_word(std::string_view text) {
  bool safe = !text.empty();
  for (char c : text) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '-' || c == '.' || c == '/' || c == ':' || c == '@' ||
                    c == '=' || c == ',' || c == '+';
    safe &= ok;
  }
  if (safe) return std::string(text);
  std::string out = "'";
  for (char c : text) {
    if (c == '\'')
      out += "'\\''";
    else
      out += c;
  }
  return out + "'";
}

std::string first_line(std::string_view text, size_t max_chars) {
  std::string_view line = text.substr(0, text.find('\n'));
  if (line.size() <= max_chars) return std::string(line);
  // Cut on a character boundary: never inside a multi-byte UTF-8 sequence.
  size_t cut = max_chars;
  while (cut > 0 && (static_cast<unsigned char>(line[cut]) & 0xC0) == 0x80) --cut;
  return std::string(line.substr(0, cut)) + "...";
}

std::string params_text(const std::map<std::string, std::string>& params) {
  std::string out;
  for (const auto& [k, v] : params) out += (out.empty() ? "" : " ") + k + "=" + v;
  return out.empty() ? "-" : out;
}

std::string time_us(double us) { return us > 0 ? with_unit(us, Unit::kMicroseconds) : "-"; }

}  // namespace kiln::report
