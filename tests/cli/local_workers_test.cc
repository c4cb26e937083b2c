// LocalWorkers with real processes: a worker killed with SIGKILL is started again after its
// back-off, the pid file follows, and stop_all leaves none running.
#include "cli/local_workers.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <thread>

#include "tests/support/test_env.h"

namespace kiln::cli {
namespace {

std::vector<pid_t> read_pids(const std::string& file) {
  std::vector<pid_t> pids;
  std::ifstream in(file);
  for (pid_t p; in >> p;) pids.push_back(p);
  return pids;
}

TEST(LocalWorkers, AKilledWorkerIsStartedAgainAfterItsBackoffAndSaysSo) {
  testing::TempDir dir;
  FILE* said = std::tmpfile();
  ASSERT_NE(said, nullptr);
  LocalWorkers workers("kiln run", dir.file("evaluators.pid"), said);
  ASSERT_TRUE(workers.start("evaluator 0", {"sleep", "60"}, dir.file("e0.log"), true).is_ok());
  ASSERT_TRUE(workers.start("the LLM agent", {"sleep", "60"}, dir.file("a.log"), false).is_ok());
  const std::vector<pid_t> first = read_pids(dir.file("evaluators.pid"));
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first, workers.evaluator_pids());

  kill(first[0], SIGKILL);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (workers.restarts() == 0 && std::chrono::steady_clock::now() < deadline) {
    workers.supervise();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_EQ(workers.restarts(), 1u);
  const std::vector<pid_t> second = read_pids(dir.file("evaluators.pid"));
  ASSERT_EQ(second.size(), 1u);
  EXPECT_NE(second[0], first[0]);
  EXPECT_EQ(kill(second[0], 0), 0);

  std::rewind(said);
  std::string text;
  for (int c; (c = std::fgetc(said)) != EOF;) text += static_cast<char>(c);
  std::fclose(said);
  EXPECT_NE(text.find("evaluator 0 (pid " + std::to_string(first[0]) + ") killed by signal 9"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("started again"), std::string::npos) << text;

  workers.stop_all();
  EXPECT_NE(kill(second[0], 0), 0) << "still running after stop_all";
}

// A worker that exits with an error status (a refused evaluator, a bad option) is reported with
// the last line of its log, where it said why; one killed by a signal is not.
// A killed worker's last line is reported only where it is kiln's own last word.
TEST(LocalWorkers, AnErrorExitIsReportedWithTheLastLineOfTheLog) {
  testing::TempDir dir;
  FILE* said = std::tmpfile();
  ASSERT_NE(said, nullptr);
  LocalWorkers workers("kiln run", "", said);
  const std::string why = "worker id 'gpu0' is in use by another live process";
  ASSERT_TRUE(
      workers
          .start("evaluator 0",
                 {"sh", "-c", "echo starting; echo \"" + why + "\" >&2; printf '\\n'; exit 1"},
                 dir.file("e0.log"), true)
          .is_ok());
  ASSERT_TRUE(
      workers.start("evaluator 1", {"sh", "-c", "echo busy; kill -9 $$"}, dir.file("e1.log"), true)
          .is_ok());
  // Killed, but its last line is kiln's own last word (a crashing reference says which).
  const std::string last_word = "kiln: the reference of target 'x' (reference.cpp), crashed";
  ASSERT_TRUE(workers
                  .start("evaluator 2",
                         {"sh", "-c", "echo busy; echo \"" + last_word + "\" >&2; kill -11 $$"},
                         dir.file("e2.log"), true)
                  .is_ok());
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  std::string text;
  while (std::chrono::steady_clock::now() < deadline &&
         (text.find("evaluator 0 (pid") == std::string::npos ||
          text.find("evaluator 1 (pid") == std::string::npos ||
          text.find("evaluator 2 (pid") == std::string::npos)) {
    workers.supervise();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    text.clear();
    std::rewind(said);
    for (int c; (c = std::fgetc(said)) != EOF;) text += static_cast<char>(c);
  }
  std::fclose(said);
  EXPECT_NE(text.find("exited with status 1 (its log ends: \"" + why + "\")"), std::string::npos)
      << text;
  const size_t e1 = text.find("evaluator 1 (pid");
  ASSERT_NE(e1, std::string::npos) << text;
  const std::string e1_line = text.substr(e1, text.find('\n', e1) - e1);
  EXPECT_NE(e1_line.find("killed by signal 9"), std::string::npos) << e1_line;
  EXPECT_EQ(e1_line.find("its log ends"), std::string::npos) << e1_line;
  EXPECT_NE(
      text.find("killed by signal 11 (Segmentation fault) (its log ends: \"" + last_word + "\")"),
      std::string::npos)
      << text;
  workers.stop_all();
}

}  // namespace
}  // namespace kiln::cli
