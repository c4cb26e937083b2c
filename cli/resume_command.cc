// See resume_command.h.
#include "cli/resume_command.h"

namespace kiln::cli {

std::string shell_quote(std::string_view text) {
  bool plain = !text.empty();
  for (char c : text) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    std::string_view("_-./:@%+=,").find(c) != std::string_view::npos;
    plain = plain && ok;
  }
  if (plain) return std::string(text);
  std::string out = "'";
  for (char c : text) {
    if (c == '\'') {
      out += "'\\''";  // close, an escaped quote, reopen
    } else {
      out += c;
    }
  }
  return out + "'";
}

std::string resume_command(std::string_view command,
                           const std::vector<std::pair<std::string, std::string>>& options,
                           const std::vector<std::string>& flags) {
  std::string out = std::string(command) + " --resume";
  for (const auto& [name, value] : options) {
    if (!value.empty()) out += " " + name + " " + shell_quote(value);
  }
  for (const std::string& flag : flags) out += " " + flag;
  return out;
}

}  // namespace kiln::cli
