// The non-terminal progress of `kiln run` and the resume command it prints.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "cli/resume_command.h"
#include "cli/status_table.h"

namespace kiln::cli {
namespace {

using std::chrono::seconds;

coordinator::TargetReport report(const std::string& state, uint64_t evals,
                                 const std::string& best) {
  coordinator::TargetReport r;
  r.target = "reduce";
  r.state = state;
  r.evaluations = evals;
  r.seed_us = 100;
  r.best_us = best.empty() ? 100 : 50;
  r.best_id = best;
  return r;
}

TEST(ProgressLines, PrintsATargetWhenItsStateOrBestChangesAndCountersAtMostEveryInterval) {
  ProgressLines lines(seconds(60));
  const auto t0 = ProgressLines::Clock::time_point{};
  EXPECT_EQ(
      lines.update({report("searching", 1, "")}, t0),
      "reduce: searching; 1 evals (0 failed), 0 kept; seed 100.00 us, best 100.00 us (1.00x)\n");
  // Counters only: quiet for a minute, every second.
  for (int s = 1; s < 60; ++s)
    EXPECT_EQ(lines.update({report("searching", 1 + s, "")}, t0 + seconds(s)), "");
  EXPECT_NE(lines.update({report("searching", 61, "")}, t0 + seconds(60)).find("61 evals"),
            std::string::npos);
  // A new best: at once.
  EXPECT_NE(
      lines.update({report("searching", 62, "c1")}, t0 + seconds(61)).find("best 50.00 us (2.00x)"),
      std::string::npos);
  // Nothing changed at all: nothing, however long.
  EXPECT_EQ(lines.update({report("searching", 62, "c1")}, t0 + seconds(600)), "");
  // Converged: at once.
  EXPECT_NE(
      lines.update({report("converged: patience", 62, "c1")}, t0 + seconds(601)).find("converged"),
      std::string::npos);
}

// The floor's share: rounded, "<1%" where it would round to 0 (the cpu backend's sanity bound;
// "0%" read as a kernel that does nothing useful), nothing without one; the table likewise.
TEST(ProgressLines, TheFloorsShareIsNeverShownAsZero) {
  coordinator::TargetReport r = report("searching", 1, "c1");
  r.fraction_of_floor = 0.0031;
  ProgressLines lines(seconds(60));
  const auto t0 = ProgressLines::Clock::time_point{};
  EXPECT_NE(lines.update({r}, t0).find("(2.00x), <1% of the floor\n"), std::string::npos);
  r.fraction_of_floor = 0.874;
  r.best_us = 40;
  r.best_id = "c2";  // a new best: printed at once
  EXPECT_NE(lines.update({r}, t0 + seconds(1)).find("(2.50x), 87% of the floor\n"),
            std::string::npos);

  char* text = nullptr;
  size_t size = 0;
  FILE* table = open_memstream(&text, &size);
  coordinator::TargetReport none = report("searching", 1, "");
  r.fraction_of_floor = 0.0031;
  print_status_table({r, none}, table);
  std::fclose(table);
  const std::string printed(text, size);
  std::free(text);
  EXPECT_NE(printed.find("2.50x     <1%"), std::string::npos) << printed;
  EXPECT_NE(printed.find("1.00x       -"), std::string::npos) << printed;
}

TEST(ResumeCommand, NamesEveryGivenOptionAndQuotesWhatTheShellWouldSplit) {
  EXPECT_EQ(resume_command("kiln coordinator",
                           {{"--out", "/runs/night 1"},
                            {"--redis", ""},
                            {"--targets-dir", "/srv/targets"},
                            {"--bind", "tcp://*:5555"}},
                           {"--no-profile-guidance"}),
            "kiln coordinator --resume --out '/runs/night 1' --targets-dir /srv/targets --bind "
            "'tcp://*:5555' --no-profile-guidance");
  EXPECT_EQ(shell_quote("it's"), "'it'\\''s'");
  EXPECT_EQ(shell_quote("redis://db:6379"), "redis://db:6379");
}

}  // namespace
}  // namespace kiln::cli
