// Checks shared by the options of several commands (CLI11 validators).
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace kiln::cli {

// A name that other machines and files show (a worker id, a GPU model): 1 to 100 printable ASCII
// characters, so that it can be neither empty nor a terminal escape.
inline CLI::Validator printable_name() {
  return CLI::Validator(
      [](std::string& v) -> std::string {
        if (v.empty() || v.size() > 100) return "expected 1 to 100 characters";
        for (unsigned char c : v) {
          if (c < 0x20 || c > 0x7e) return "expected printable ASCII characters";
        }
        return "";
      },
      "NAME", "printable name");
}

}  // namespace kiln::cli
