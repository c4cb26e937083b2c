// ChildProcess with real programs: how a child ended, its output file, stopping one that ignores
// SIGTERM or is stopped, a program that does not exist, and die_with_parent.
#include "shared/child_process.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <thread>

#include "tests/support/test_env.h"

namespace kiln {
namespace {

using Clock = std::chrono::steady_clock;

SpawnOptions command(std::vector<std::string> argv, std::string output_file = "",
                     bool die_with_parent = false) {
  SpawnOptions o;
  o.argv = std::move(argv);
  o.output_file = std::move(output_file);
  o.die_with_parent = die_with_parent;
  return o;
}

// A process that runs (a zombie waiting for a reaper does not).
bool alive(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), {});
  const size_t paren = text.rfind(')');
  return paren != std::string::npos && paren + 2 < text.size() && text[paren + 2] != 'Z' &&
         text[paren + 2] != 'X';
}

TEST(ChildProcess, ReportsHowItEndedAndWritesItsOutputToTheFile) {
  testing::TempDir dir;
  auto child = ChildProcess::spawn(
      {{"/bin/sh", "-c", "echo to-out; echo to-err >&2; exit 3"}, {}, dir.file("log")});
  ASSERT_TRUE(child.is_ok()) << child.status().to_string();
  ExitStatus s = child->wait();
  EXPECT_EQ(s.exit_code, 3);
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.describe(), "exited with status 3");
  std::ifstream in(dir.file("log"));
  std::string text((std::istreambuf_iterator<char>(in)), {});
  EXPECT_EQ(text, "to-out\nto-err\n");
}

TEST(ChildProcess, StopEndsAChildThatIgnoresSigtermOrIsStopped) {
  auto stubborn =
      ChildProcess::spawn(command({"/bin/sh", "-c", "trap '' TERM; while :; do sleep 0.05; done"}));
  ASSERT_TRUE(stubborn.is_ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the trap is set
  const auto start = Clock::now();
  stubborn->stop(std::chrono::milliseconds(300));
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(3));
  ASSERT_TRUE(stubborn->exit_status().has_value());
  EXPECT_EQ(stubborn->exit_status()->term_signal, SIGKILL);

  auto frozen = ChildProcess::spawn(command({"sleep", "30"}));  // found in PATH
  ASSERT_TRUE(frozen.is_ok());
  frozen->signal(SIGSTOP);
  frozen->stop(std::chrono::seconds(2));
  ASSERT_TRUE(frozen->exit_status().has_value());
  EXPECT_EQ(frozen->exit_status()->term_signal, SIGTERM) << frozen->exit_status()->describe();
  EXPECT_NE(frozen->exit_status()->describe().find("signal 15"), std::string::npos);
}

TEST(ChildProcess, AProgramThatDoesNotExistIsAClearError) {
  auto missing = ChildProcess::spawn(command({"kiln-no-such-program"}));
  ASSERT_FALSE(missing.is_ok());
  EXPECT_NE(missing.status().message().find("kiln-no-such-program"), std::string::npos);
  auto bad_log = ChildProcess::spawn(command({"true"}, "/no/such/dir/log"));
  ASSERT_FALSE(bad_log.is_ok());
  EXPECT_NE(bad_log.status().message().find("/no/such/dir/log"), std::string::npos);
}

// A child started with die_with_parent by a process that is then killed with SIGKILL ends too.
TEST(ChildProcess, AChildThatDiesWithItsParentEndsWhenTheParentIsKilled) {
  testing::TempDir dir;
  // The parent is a forked copy of this test, which starts `sleep` and waits to be killed.
  const pid_t middle = fork();
  ASSERT_GE(middle, 0);
  if (middle == 0) {
    auto grandchild = ChildProcess::spawn(command({"sleep", "30"}, "", /*die_with_parent=*/true));
    if (!grandchild.is_ok()) _exit(1);
    std::ofstream(dir.file("pid")) << grandchild->pid() << "\n";
    pause();
    _exit(0);
  }
  pid_t grandchild = -1;
  for (int i = 0; i < 200 && grandchild <= 0; ++i) {
    std::ifstream(dir.file("pid")) >> grandchild;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_GT(grandchild, 0);
  EXPECT_TRUE(alive(grandchild));
  kill(middle, SIGKILL);
  waitpid(middle, nullptr, 0);
  bool gone = false;
  for (int i = 0; i < 300 && !gone; ++i) {  // reparented to init, which reaps it
    gone = !alive(grandchild);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(gone);
}

}  // namespace
}  // namespace kiln
