// LogRateLimiter: fixed windows per key, counted suppressions.
#include "shared/log_rate.h"

#include <spdlog/spdlog.h>

namespace kiln {

LogRateLimiter::LogRateLimiter(uint32_t per_window, std::chrono::milliseconds window, NowFn now,
                               size_t max_keys)
    : per_window_(per_window), window_(window), now_(std::move(now)), max_keys_(max_keys) {}

std::string LogRateLimiter::key_for(std::string_view key, Clock::time_point now) {
  if (entries_.count(key) || entries_.size() < max_keys_) return std::string(key);
  // Full: forget keys whose window is over and that owe no report, then try again.
  for (auto it = entries_.begin(); it != entries_.end();) {
    const bool over = now - it->second.window_start >= window_;
    it = over && it->second.suppressed == 0 ? entries_.erase(it) : std::next(it);
  }
  return entries_.size() < max_keys_ ? std::string(key) : std::string("(other)");
}

LogRateLimiter::Verdict LogRateLimiter::admit(std::string_view key) {
  std::lock_guard lock(mu_);
  const Clock::time_point now = now_();
  auto [it, added] = entries_.try_emplace(key_for(key, now));
  Entry& e = it->second;
  if (added || now - e.window_start >= window_) {
    e.window_start = now;
    e.lines = 0;
  }
  Verdict v;
  if (e.lines < per_window_) {
    ++e.lines;
    v.log = true;
    v.suppressed = e.suppressed;
    e.suppressed = 0;
  } else {
    ++e.suppressed;
  }
  return v;
}

std::vector<std::pair<std::string, uint64_t>> LogRateLimiter::take_suppressed() {
  std::lock_guard lock(mu_);
  const Clock::time_point now = now_();
  std::vector<std::pair<std::string, uint64_t>> out;
  for (auto it = entries_.begin(); it != entries_.end();) {
    if (it->second.suppressed > 0 && now - it->second.window_start >= window_) {
      out.emplace_back(it->first, it->second.suppressed);
      it = entries_.erase(it);
    } else {
      ++it;
    }
  }
  return out;
}

void log_limited(LogRateLimiter& limiter, spdlog::level::level_enum level, std::string_view key,
                 std::string_view message) {
  const LogRateLimiter::Verdict v = limiter.admit(key);
  if (!v.log) return;
  if (v.suppressed > 0)
    spdlog::log(level, "suppressed {} similar messages ({})", v.suppressed, key);
  spdlog::log(level, "{}", message);
}

void log_suppressed(LogRateLimiter& limiter, spdlog::level::level_enum level) {
  for (const auto& [key, n] : limiter.take_suppressed()) {
    spdlog::log(level, "suppressed {} similar messages ({})", n, key);
  }
}

}  // namespace kiln
