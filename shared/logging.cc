// Builds spdlog's default logger from LogOptions: plain text or JSON lines, to stderr or a file
// (appended, every line flushed), each line naming the process's role (LogOptions.component, set by
// cli/app.cc to the subcommand) and pid.
#include "shared/logging.h"

#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <memory>

namespace kiln {
namespace {

// `%*`: the message with JSON string escaping, so that every JSON line parses.
void put(spdlog::memory_buf_t& dest, std::string_view s) { dest.append(s.data(), s.data() + s.size()); }

class JsonEscapedMessage : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&,
              spdlog::memory_buf_t& dest) override {
    static constexpr char kHex[] = "0123456789abcdef";
    for (char c : msg.payload) {
      switch (c) {
        case '"': put(dest, "\\\""); break;
        case '\\': put(dest, "\\\\"); break;
        case '\n': put(dest, "\\n"); break;
        case '\t': put(dest, "\\t"); break;
        case '\r': put(dest, "\\r"); break;
        default:
          if (static_cast<unsigned char>(c) < 0x20) {
            char esc[6] = {'\\', 'u', '0', '0', kHex[(c >> 4) & 0xF], kHex[c & 0xF]};
            dest.append(esc, esc + 6);
          } else {
            dest.push_back(c);
          }
      }
    }
  }
  std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<JsonEscapedMessage>();
  }
};

}  // namespace

Status configure_logging(const LogOptions& options) {
  spdlog::level::level_enum level = spdlog::level::from_str(options.level);
  // from_str maps unknown names to "off"; only "off" itself may mean off.
  if (level == spdlog::level::off && options.level != "off") {
    return invalid_argument("unknown log level '" + options.level +
                            "' (use trace, debug, info, warn, error or off)");
  }
  spdlog::sink_ptr sink;
  try {
    if (options.file.empty()) {
      sink = std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
    } else {
      sink = std::make_shared<spdlog::sinks::basic_file_sink_mt>(options.file, /*truncate=*/false);
    }
  } catch (const spdlog::spdlog_ex& e) {
    return unavailable(std::string("cannot open log file: ") + e.what());
  }
  auto logger = std::make_shared<spdlog::logger>(
      options.component.empty() ? "kiln" : options.component, sink);
  if (options.json) {
    auto formatter = std::make_unique<spdlog::pattern_formatter>();
    formatter->add_flag<JsonEscapedMessage>('*').set_pattern(
        R"({"ts":"%Y-%m-%dT%H:%M:%S.%e%z","level":"%l","component":"%n","pid":%P,"msg":"%*"})");
    logger->set_formatter(std::move(formatter));
  } else {
    logger->set_pattern("%Y-%m-%d %H:%M:%S.%e %^%-5l%$ [%n:%P] %v");
  }
  logger->set_level(level);
  // Every line, not only warnings: the info lines before a crash are the ones an operator needs,
  // and a buffered file loses them when the process is killed. Logging is a few lines per task.
  logger->flush_on(spdlog::level::trace);
  spdlog::set_default_logger(std::move(logger));
  return Status::ok();
}

}  // namespace kiln
