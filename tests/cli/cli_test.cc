// Runs the real `kiln` binary as a user would and checks what it prints and returns.
#include <gtest/gtest.h>

#include <filesystem>

#include <nlohmann/json.hpp>

#include "tests/support/test_env.h"

namespace kiln {
namespace {

using kiln::testing::kiln_binary;
using kiln::testing::run_command;

TEST(Cli, HelpListsEverySubcommandAndExitsZero) {
  std::string out;
  ASSERT_EQ(run_command(kiln_binary() + " --help", &out), 0) << out;
  for (const char* sub : {"run", "coordinator", "evaluator", "agent", "eval", "status", "export",
                          "report", "profile", "version"}) {
    EXPECT_NE(out.find(sub), std::string::npos) << "missing " << sub << " in:\n" << out;
  }
}

TEST(Cli, EverySubcommandHasItsOwnHelp) {
  std::string out;
  ASSERT_EQ(run_command(kiln_binary() + " version --help", &out), 0) << out;
  EXPECT_NE(out.find("--json"), std::string::npos) << out;
}

TEST(Cli, VersionWorksWithoutAGpuDriver) {
  std::string out;
  ASSERT_EQ(run_command(kiln_binary() + " version", &out), 0) << out;
  EXPECT_NE(out.find("kiln 0."), std::string::npos) << out;
  EXPECT_NE(out.find("CUDA driver:"), std::string::npos) << out;
  EXPECT_NE(out.find("NVRTC:"), std::string::npos) << out;
}

TEST(Cli, VersionJsonIsOneParsableObject) {
  std::string out;
  ASSERT_EQ(run_command(kiln_binary() + " version --json 2>/dev/null", &out), 0) << out;
  nlohmann::json j = nlohmann::json::parse(out);
  EXPECT_TRUE(j.contains("version"));
  EXPECT_TRUE(j.contains("commit"));
  EXPECT_TRUE(j["gpus"].is_array());
}

TEST(Cli, UnknownSubcommandIsAUsageError) {
  std::string out;
  EXPECT_EQ(run_command(kiln_binary() + " frobnicate", &out), 2) << out;
}

TEST(Cli, BadLogLevelIsRejectedWithTheChoices) {
  std::string out;
  EXPECT_EQ(run_command(kiln_binary() + " --log-level loud version", &out), 2) << out;
  EXPECT_NE(out.find("unknown log level 'loud'"), std::string::npos) << out;
}

TEST(Cli, RunWithABrokenConfigNamesTheFileAndTheFieldAndStartsNothing) {
  testing::TempDir dir;
  const std::string cfg = dir.write("run.json", R"({"search": {"floor_fraction": 2}})");
  std::string out;
  EXPECT_EQ(run_command(kiln_binary() + " run --backend cpu --config " + cfg + " --out " + dir.path() + "/run", &out), 2)
      << out;
  EXPECT_NE(out.find("run.json"), std::string::npos) << out;
  EXPECT_NE(out.find("search.floor_fraction"), std::string::npos) << out;
  EXPECT_FALSE(std::filesystem::exists(dir.path() + "/run/redis")) << out;
}

}  // namespace
}  // namespace kiln
