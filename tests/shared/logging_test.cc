#include "shared/logging.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "shared/fatal.h"
#include "shared/log_rate.h"
#include "tests/support/test_env.h"

namespace kiln {
namespace {

using testing::read_file;

// Puts logging back on stderr when a test is done with its file.
struct RestoreLogging {
  ~RestoreLogging() { (void)configure_logging(LogOptions{}); }
};

TEST(Logging, JsonLinesParseEvenWithQuotesAndNewlinesInTheMessage) {
  testing::TempDir dir;
  RestoreLogging restore;
  LogOptions o;
  o.json = true;
  o.file = dir.file("kiln.log");
  o.component = "evaluator";
  ASSERT_TRUE(configure_logging(o).is_ok());
  spdlog::info("task \"t1\": line one\nline two \\ done");
  spdlog::default_logger()->flush();
  std::ifstream in(o.file);
  std::string line;
  ASSERT_TRUE(std::getline(in, line));
  nlohmann::json j = nlohmann::json::parse(line);
  EXPECT_EQ(j["msg"], "task \"t1\": line one\nline two \\ done");
  EXPECT_EQ(j["component"], "evaluator");
  EXPECT_EQ(j["level"], "info");
  EXPECT_EQ(j["pid"], static_cast<int>(getpid()));
}

TEST(Logging, UnknownLevelIsRejectedWithTheChoices) {
  LogOptions o;
  o.level = "loud";
  Status s = configure_logging(o);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("trace, debug, info, warn, error or off"), std::string::npos);
}

// A process killed with SIGKILL runs no destructor and flushes nothing: only lines already written
// to the file survive. An info line must be one of them, and it names the role and the pid.
TEST(Logging, AnInfoLineIsInTheFileEvenWhenTheProcessIsKilledRightAfter) {
  testing::TempDir dir;
  const std::string path = dir.file("evaluator.log");
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    LogOptions o;
    o.file = path;
    o.component = "evaluator";
    if (!configure_logging(o).is_ok()) _exit(3);
    spdlog::info("evaluating task t-7 (the last line before the kill)");
    raise(SIGKILL);
    _exit(4);  // not reached
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "child status " << status;
  const std::string text = read_file(path);
  EXPECT_NE(text.find("evaluating task t-7 (the last line before the kill)"), std::string::npos)
      << "log file: '" << text << "'";
  EXPECT_NE(text.find("[evaluator:" + std::to_string(child) + "]"), std::string::npos) << text;
}

TEST(Logging, EveryTextLineNamesTheRoleAndPidAndDefaultsToKiln) {
  testing::TempDir dir;
  RestoreLogging restore;
  LogOptions o;
  o.file = dir.file("a.log");
  ASSERT_TRUE(configure_logging(o).is_ok());
  spdlog::warn("no role given");
  o.file = dir.file("b.log");
  o.component = "coordinator";
  ASSERT_TRUE(configure_logging(o).is_ok());
  spdlog::info("role given");
  const std::string pid = std::to_string(getpid());
  EXPECT_NE(read_file(dir.file("a.log")).find("[kiln:" + pid + "] no role given"),
            std::string::npos)
      << read_file(dir.file("a.log"));
  EXPECT_NE(read_file(dir.file("b.log")).find("[coordinator:" + pid + "] role given"),
            std::string::npos)
      << read_file(dir.file("b.log"));
}

TEST(Logging, AFatalErrorGoesToStderrAndIntoTheLogFile) {
  testing::TempDir dir;
  RestoreLogging restore;
  LogOptions o;
  o.file = dir.file("run.log");
  o.component = "run";
  ASSERT_TRUE(configure_logging(o).is_ok());
  ::testing::internal::CaptureStderr();
  report_fatal("kiln run: --islands must be at least 1");
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(err, "kiln run: --islands must be at least 1\n");
  const std::string text = read_file(o.file);
  EXPECT_NE(text.find("critical [run:" + std::to_string(getpid()) +
                      "] kiln run: --islands must be at least 1"),
            std::string::npos)
      << text;
}

TEST(Logging, AFatalErrorIsPrintedOnceWhenLoggingGoesToStderr) {
  RestoreLogging restore;
  ASSERT_TRUE(configure_logging(LogOptions{}).is_ok());
  ::testing::internal::CaptureStderr();
  report_fatal("kiln agent: the coordinator said bye");
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "kiln agent: the coordinator said bye\n");
}

TEST(LoggingDeathTest, AnInvariantFailureIsWrittenToTheLogFileBeforeTheAbort) {
  testing::TempDir dir;
  const std::string path = dir.file("abort.log");
  EXPECT_DEATH(
      {
        LogOptions o;
        o.file = path;
        o.component = "coordinator";
        (void)configure_logging(o);
        KILN_CHECK(1 + 1 == 3, "arithmetic still works");
      },
      "invariant failed");
  const std::string text = read_file(path);
  EXPECT_NE(text.find("critical [coordinator:"), std::string::npos) << text;
  EXPECT_NE(text.find("invariant failed at"), std::string::npos) << text;
  EXPECT_NE(text.find("arithmetic still works"), std::string::npos) << text;
}

// ---- LogRateLimiter ----

struct FakeClock {
  LogRateLimiter::Clock::time_point t{};
  LogRateLimiter::NowFn fn() {
    return [this] { return t; };
  }
  void advance(std::chrono::milliseconds d) { t += d; }
};

TEST(LogRateLimiter, LetsNLinesPerKeyThroughPerWindowAndCountsTheRest) {
  FakeClock clock;
  LogRateLimiter limiter(3, std::chrono::seconds(1), clock.fn());
  int written = 0;
  for (int i = 0; i < 10; ++i) {
    LogRateLimiter::Verdict v = limiter.admit("malformed:peer-1");
    written += v.log;
    EXPECT_EQ(v.suppressed, 0u);
    clock.advance(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(written, 3);
  // Another key has its own budget.
  EXPECT_TRUE(limiter.admit("malformed:peer-2").log);
  // Within the window the first key stays quiet; after it, the next line reports all 8 dropped.
  EXPECT_FALSE(limiter.admit("malformed:peer-1").log);
  clock.advance(std::chrono::seconds(1));
  LogRateLimiter::Verdict v = limiter.admit("malformed:peer-1");
  EXPECT_TRUE(v.log);
  EXPECT_EQ(v.suppressed, 8u);
  EXPECT_EQ(limiter.admit("malformed:peer-1").suppressed, 0u);  // reported once
}

TEST(LogRateLimiter, ABurstThatStopsIsReportedByTakeSuppressedAfterItsWindow) {
  FakeClock clock;
  LogRateLimiter limiter(1, std::chrono::seconds(1), clock.fn());
  for (int i = 0; i < 5; ++i) (void)limiter.admit("worker w1 silent");
  EXPECT_TRUE(limiter.take_suppressed().empty());  // its window is still open
  clock.advance(std::chrono::seconds(1));
  auto taken = limiter.take_suppressed();
  ASSERT_EQ(taken.size(), 1u);
  EXPECT_EQ(taken[0].first, "worker w1 silent");
  EXPECT_EQ(taken[0].second, 4u);
  EXPECT_TRUE(limiter.take_suppressed().empty());
  EXPECT_EQ(limiter.admit("worker w1 silent").suppressed, 0u);  // already reported
}

TEST(LogRateLimiter, KeysBeyondTheTableShareOneBudget) {
  FakeClock clock;
  LogRateLimiter limiter(1, std::chrono::seconds(1), clock.fn(), /*max_keys=*/2);
  EXPECT_TRUE(limiter.admit("a").log);
  EXPECT_TRUE(limiter.admit("b").log);
  EXPECT_TRUE(limiter.admit("invented-1").log);  // the first line of "(other)"
  for (int i = 2; i < 100; ++i) EXPECT_FALSE(limiter.admit("invented-" + std::to_string(i)).log);
  clock.advance(std::chrono::seconds(1));
  // Windows over and nothing owed by a and b: their places are free again.
  EXPECT_TRUE(limiter.admit("c").log);
}

TEST(LogRateLimiter, LogLimitedWritesTheSuppressedCountBeforeTheNextLine) {
  testing::TempDir dir;
  RestoreLogging restore;
  LogOptions o;
  o.file = dir.file("limited.log");
  o.component = "coordinator";
  ASSERT_TRUE(configure_logging(o).is_ok());
  FakeClock clock;
  LogRateLimiter limiter(2, std::chrono::seconds(1), clock.fn());
  for (int i = 0; i < 50; ++i) {
    log_limited(limiter, spdlog::level::warn, "malformed",
                "malformed message " + std::to_string(i));
  }
  clock.advance(std::chrono::seconds(1));
  log_limited(limiter, spdlog::level::warn, "malformed", "malformed message 50");
  const std::string text = read_file(o.file);
  size_t lines = 0;
  for (char c : text) lines += c == '\n';
  EXPECT_EQ(lines, 4u) << text;  // messages 0 and 1, the count, message 50
  EXPECT_NE(text.find("malformed message 1\n"), std::string::npos) << text;
  EXPECT_EQ(text.find("malformed message 2\n"), std::string::npos) << text;
  EXPECT_NE(text.find("suppressed 48 similar messages (malformed)"), std::string::npos) << text;
  EXPECT_NE(text.find("malformed message 50"), std::string::npos) << text;
}

}  // namespace
}  // namespace kiln
