// report_fatal: stderr, and the log file when there is one.
#include "shared/fatal.h"

#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/spdlog.h>

#include <cstdio>
#include <memory>
#include <string>

#include "shared/text.h"

namespace kiln {

void report_fatal(std::string_view message) {
  const std::string shown = terminal_safe(message);  // it may quote a path, a file or a reply
  std::fprintf(stderr, "%s\n", shown.c_str());
  std::fflush(stderr);
  std::shared_ptr<spdlog::logger> logger = spdlog::default_logger();
  if (!logger) return;
  bool to_file = false;
  for (const spdlog::sink_ptr& sink : logger->sinks()) {
    to_file = to_file || std::dynamic_pointer_cast<spdlog::sinks::basic_file_sink_mt>(sink);
  }
  if (!to_file) return;  // a stderr sink would print it a second time
  logger->critical("{}", message);
  logger->flush();
}

}  // namespace kiln
