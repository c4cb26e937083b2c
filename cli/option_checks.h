// Checks shared by the options of several commands (CLI11 validators).
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace kiln::cli {

// Why `v` cannot be a name that other machines and files show (a worker id, a GPU model), or "":
// 1 to 100 printable ASCII characters, so that it can be neither empty nor a terminal escape.
inline std::string printable_name_problem(const std::string& v) {
  if (v.empty() || v.size() > 100) return "expected 1 to 100 characters";
  for (unsigned char c : v) {
    if (c < 0x20 || c > 0x7e) return "expected printable ASCII characters";
  }
  return "";
}

inline CLI::Validator printable_name() {
  return CLI::Validator([](std::string& v) { return printable_name_problem(v); }, "NAME",
                        "printable name");
}

}  // namespace kiln::cli
