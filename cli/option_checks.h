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

// Why `v` is not a real GPU architecture as kiln compiles for one (a CUBIN: "sm_", two or three
// digits, maybe one letter: sm_80, sm_90a, sm_100f), or "". A wrong --arch once reached NVRTC and
// came back as a compile failure of every kernel in every dtype.
inline std::string gpu_arch_problem(const std::string& v) {
  const std::string problem = "expected a real GPU architecture such as sm_90a or sm_80";
  if (v.rfind("sm_", 0) != 0 || v.size() > 7) return problem;
  size_t digits = 0;
  while (3 + digits < v.size() && v[3 + digits] >= '0' && v[3 + digits] <= '9') ++digits;
  if (digits < 2 || digits > 3) return problem;
  const size_t rest = v.size() - 3 - digits;
  if (rest > 1 || (rest == 1 && (v.back() < 'a' || v.back() > 'z'))) return problem;
  return "";
}

inline CLI::Validator gpu_arch() {
  return CLI::Validator([](std::string& v) { return gpu_arch_problem(v); }, "ARCH",
                        "GPU architecture");
}

}  // namespace kiln::cli
