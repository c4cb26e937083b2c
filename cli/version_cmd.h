// `kiln version`: kiln's version and commit, and what CUDA the machine offers.
#pragma once

#include <string>

namespace kiln::cli {

// Human-readable lines, or one JSON object when `json` is set.
std::string version_report(bool json);

}  // namespace kiln::cli
