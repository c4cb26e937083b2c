// Logging setup (spdlog). Only `main` calls configure_logging; components log through spdlog's
// default logger and never configure it.
#pragma once

#include <string>

#include "shared/status.h"

namespace kiln {

struct LogOptions {
  std::string level = "info";  // trace, debug, info, warn, error, off
  bool json = false;           // one JSON object per line (for log shippers)
  std::string file;            // empty: stderr
  std::string component;       // "coordinator", "evaluator", ... (a field in every line)
};

Status configure_logging(const LogOptions& options);

}  // namespace kiln
