// Identifier check, errno text, and peer text made safe to log.
#include "shared/text.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdint>
#include <cstring>

namespace kiln {

namespace {

// Length of the valid UTF-8 sequence starting at text[i] (2..4), or 0 when there is none: a
// continuation byte out of place, a truncated or overlong sequence, a surrogate, or a code point
// above U+10FFFF.
size_t utf8_sequence(std::string_view text, size_t i) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char c = b(i);
  size_t n = 0;
  uint32_t cp = 0;
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2, cp = c & 0x1F;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3, cp = c & 0x0F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4, cp = c & 0x07;
  } else {
    return 0;
  }
  if (i + n > text.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((b(i + k) & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (b(i + k) & 0x3F);
  }
  if ((n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) || cp > 0x10FFFF) return 0;  // overlong
  if (cp >= 0xD800 && cp <= 0xDFFF) return 0;                                         // surrogate
  if (cp >= 0x80 && cp <= 0x9F) return 0;  // C1 control: escaped like the other controls
  return n;
}

void append_hex(std::string& out, unsigned char c) {
  static constexpr char kHex[] = "0123456789abcdef";
  out += "\\x";
  out += kHex[c >> 4];
  out += kHex[c & 15];
}

}  // namespace

std::optional<int64_t> parse_int64(std::string_view text) {
  int64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return v;
}

bool is_identifier(std::string_view s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
}

std::string errno_text(int err) { return std::strerror(err); }

std::string terminal_safe(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c == '\n' || c == '\t' || (c >= 0x20 && c < 0x7f)) {
      out += static_cast<char>(c);
      ++i;
    } else if (size_t n = c >= 0x80 ? utf8_sequence(text, i) : 0;
               n > 0 && !(c == 0xc2 && static_cast<unsigned char>(text[i + 1]) < 0xa0)) {
      out.append(text.substr(i, n));  // (U+0080-U+009F, the C1 controls, are not)
      i += n;
    } else {
      append_hex(out, c);
      ++i;
    }
  }
  return out;
}

std::string log_safe(std::string_view text, size_t max_bytes) {
  std::string out;
  out.reserve(std::min(text.size(), max_bytes) + 16);
  size_t i = 0;
  while (i < text.size()) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    std::string piece;  // what the input at i becomes
    size_t used = 1;
    if (c == '\\') {
      piece = "\\\\";
    } else if (c < 0x20 || c == 0x7f) {
      append_hex(piece, c);
    } else if (c < 0x80) {
      piece = static_cast<char>(c);
    } else if (size_t n = utf8_sequence(text, i); n > 0) {
      piece = std::string(text.substr(i, n));
      used = n;
    } else {
      append_hex(piece, c);
    }
    if (out.size() + piece.size() > max_bytes) break;
    out += piece;
    i += used;
  }
  if (i < text.size()) out += "...(" + std::to_string(text.size()) + " bytes)";
  return out;
}

}  // namespace kiln
