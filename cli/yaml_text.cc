// See yaml_text.h.
#include "cli/yaml_text.h"

#include <cctype>

namespace kiln::cli {
namespace {

// Whether `s` reads back from YAML as this very string when written plain: no indicator at the
// start, no ": " or " #" inside, no surrounding spaces, and not a word YAML gives another type
// (numbers, booleans, null).
bool plain_ok(const std::string& s) {
  if (s.empty() || s.front() == ' ' || s.back() == ' ') return false;
  if (std::string("-?:,[]{}#&*!|>'\"%@`~").find(s.front()) != std::string::npos) return false;
  for (unsigned char c : s) {
    if (c < 0x20 || c >= 0x7f) return false;
  }
  if (s.find(": ") != std::string::npos || s.find(" #") != std::string::npos || s.back() == ':')
    return false;
  static const char* kTyped[] = {"true", "false", "yes", "no", "on", "off", "null", "y", "n", "~"};
  std::string lower;
  for (unsigned char c : s) lower += static_cast<char>(std::tolower(c));
  for (const char* word : kTyped) {
    if (lower == word) return false;
  }
  // Anything that starts like a number ("1", "1.5", ".5", "+1", "0x1f", "1e3") is quoted.
  const unsigned char first = static_cast<unsigned char>(s.front());
  if (std::isdigit(first) || first == '.' || first == '+') return false;
  return true;
}

std::string scalar(const nlohmann::json& v) {
  if (v.is_string()) {
    const std::string& s = v.get_ref<const std::string&>();
    return plain_ok(s) ? s : v.dump();
  }
  return v.dump();  // numbers, booleans, null
}

bool is_empty_container(const nlohmann::json& v) {
  return (v.is_object() || v.is_array()) && v.empty();
}

void write(const nlohmann::json& v, int indent, std::string* out);

// A value after "key:" or "- ": scalars and empty containers on the same line, others below.
void write_after(const nlohmann::json& v, int indent, bool in_list, std::string* out) {
  if (is_empty_container(v)) {
    *out += v.is_object() ? " {}\n" : " []\n";
  } else if (v.is_object() || v.is_array()) {
    if (in_list && v.is_object()) {
      // "- key: value" with the mapping's other keys under the first.
      std::string block;
      write(v, indent + 2, &block);
      *out += " " + block.substr(static_cast<size_t>(indent + 2));
    } else {
      *out += "\n";
      write(v, v.is_array() && !in_list ? indent : indent + 2, out);
    }
  } else {
    *out += " " + scalar(v) + "\n";
  }
}

void write(const nlohmann::json& v, int indent, std::string* out) {
  const std::string pad(static_cast<size_t>(indent), ' ');
  if (v.is_object()) {
    for (const auto& [key, value] : v.items()) {
      *out += pad + scalar(nlohmann::json(key)) + ":";
      write_after(value, indent, false, out);
    }
  } else if (v.is_array()) {
    for (const auto& item : v) {
      *out += pad + "-";
      write_after(item, indent, true, out);
    }
  } else {
    *out += pad + scalar(v) + "\n";
  }
}

}  // namespace

std::string to_yaml(const nlohmann::json& document) {
  if (is_empty_container(document)) return document.is_object() ? "{}\n" : "[]\n";
  std::string out;
  write(document, 0, &out);
  return out;
}

std::string to_yaml_stream(const std::vector<nlohmann::json>& documents) {
  std::string out;
  for (const auto& d : documents) out += "---\n" + to_yaml(d);
  return out;
}

}  // namespace kiln::cli
