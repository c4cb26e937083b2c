// One coordinator per run on a shared Redis (cli/run_lease.h): a second one is refused while the
// first runs, and a coordinator killed on this host is taken over at once by the next.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "tests/support/test_env.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using testing::kiln_binary;
using testing::run_command;

TEST(RunLease, ASecondCoordinatorOnTheRunsRedisIsRefusedAndAKilledOneIsTakenOver) {
  testing::TempDir dir;
  testing::RedisServer redis;
  ASSERT_TRUE(redis.started()) << redis.error();
  const std::string coordinator =
      kiln_binary() + " coordinator --backend cpu --targets reduce --bind 'tcp://127.0.0.1:*' " +
      "--http off --redis unix://" + redis.socket_path();
  std::string text;
  ASSERT_EQ(run_command(coordinator + " --budget 60s --out " + dir.file("first") + " > " +
                            dir.file("first.log") + " 2>&1 & echo $! > " + dir.file("first.pid"),
                        &text),
            0)
      << text;
  pid_t first = -1;
  std::ifstream(dir.file("first.pid")) >> first;
  ASSERT_GT(first, 0);
  for (int i = 0; i < 300 && !fs::exists(dir.file("first/endpoint")); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_TRUE(fs::exists(dir.file("first/endpoint"))) << testing::read_file(dir.file("first.log"));

  // A resume of the run while it runs: it handed out the run's tasks a second time.
  EXPECT_EQ(run_command(coordinator + " --resume --budget 5s --out " + dir.file("second") + " 2>&1",
                        &text),
            2)
      << text;
  EXPECT_NE(text.find("another coordinator is running this Redis's run"), std::string::npos)
      << text;
  EXPECT_NE(text.find("pid " + std::to_string(first)), std::string::npos) << text;

  // Killed, it renews nothing; the next coordinator on this host sees its pid gone and goes on.
  ASSERT_EQ(kill(first, SIGKILL), 0);
  for (int i = 0; i < 100 && kill(first, 0) == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(run_command(coordinator + " --resume --budget 1s --out " + dir.file("third") + " 2>&1",
                        &text),
            0)
      << text;
  EXPECT_EQ(text.find("waiting up to"), std::string::npos) << text;
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(60)) << text;
}

}  // namespace
}  // namespace kiln
