// A rate limit for log lines that can repeat without bound (a peer that keeps sending malformed
// messages, a worker that keeps timing out): at most `per_window` lines per key in each window,
// then silence, then one line saying how many were suppressed. The clock is injectable, so tests
// do not sleep.
#pragma once

#include <spdlog/common.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kiln {

class LogRateLimiter {
 public:
  using Clock = std::chrono::steady_clock;
  using NowFn = std::function<Clock::time_point()>;

  // A window opens at a key's first line and lasts `window`. Up to `max_keys` keys are tracked;
  // past that, lines of new keys share one key, "(other)", so a peer inventing keys cannot grow
  // the table without bound.
  LogRateLimiter(uint32_t per_window, std::chrono::milliseconds window, NowFn now = Clock::now,
                 size_t max_keys = 1024);

  struct Verdict {
    bool log = false;         // write this line
    uint64_t suppressed = 0;  // lines of this key dropped since its last written line: say so first
  };

  // Counts one line of `key` now. Thread-safe.
  Verdict admit(std::string_view key);

  // The keys whose window has ended with lines dropped since their last written line, with how
  // many, in key order; they are forgotten. For a periodic call, so that a burst that stops is
  // still reported.
  std::vector<std::pair<std::string, uint64_t>> take_suppressed();

 private:
  struct Entry {
    Clock::time_point window_start;
    uint32_t lines = 0;       // written in this window
    uint64_t suppressed = 0;  // dropped since the last written line
  };
  std::string key_for(std::string_view key, Clock::time_point now);  // with mu_ held

  const uint32_t per_window_;
  const std::chrono::milliseconds window_;
  const NowFn now_;
  const size_t max_keys_;
  std::mutex mu_;
  std::map<std::string, Entry, std::less<>> entries_;
};

// Logs `message` at `level` through spdlog's default logger unless `limiter` suppresses it; when
// lines of `key` were suppressed before, first logs "suppressed N similar messages (KEY)".
void log_limited(LogRateLimiter& limiter, spdlog::level::level_enum level, std::string_view key,
                 std::string_view message);

// Logs one "suppressed N similar messages (KEY)" line at `level` for every key take_suppressed()
// returns. Call it now and then (e.g. once per event-loop second).
void log_suppressed(LogRateLimiter& limiter, spdlog::level::level_enum level);

}  // namespace kiln
