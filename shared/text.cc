// Identifier check, errno text, and peer text made safe to log.
#include "shared/text.h"

#include <algorithm>
#include <cctype>
#include <cstring>

namespace kiln {

bool is_identifier(std::string_view s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
}

std::string errno_text(int err) { return std::strerror(err); }

std::string log_safe(std::string_view text, size_t max_bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  const size_t shown = std::min(text.size(), max_bytes);
  out.reserve(shown + 16);
  for (size_t i = 0; i < shown; ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c == '\\') {
      out += "\\\\";  // so that a literal "\x0a" in the text cannot pass for an escape
    } else if (c < 0x20 || c == 0x7f) {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
  if (text.size() > shown) out += "...(" + std::to_string(text.size()) + " bytes)";
  return out;
}

}  // namespace kiln
