// Identifier check and errno text.
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

}  // namespace kiln
