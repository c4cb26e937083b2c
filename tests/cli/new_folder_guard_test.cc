// NewFolderGuard (cli/run_support.h): a run's output folder goes again when the run fails before it
// is recorded there, with the parents it made, and only then; a folder that was there loses only
// what the run added.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "cli/run_support.h"
#include "tests/support/test_env.h"

namespace kiln::cli {
namespace {

namespace fs = std::filesystem;

TEST(NewFolderGuard, RemovesTheFolderItsRunMadeWithTheParentsItMade) {
  testing::TempDir dir;
  const std::string out = dir.file("a/b/out/");
  {
    NewFolderGuard guard(out);
    fs::create_directories(out);
    std::ofstream(out + "redis.pid") << "1\n";
  }
  EXPECT_FALSE(fs::exists(dir.file("a")));
  EXPECT_TRUE(fs::exists(dir.path()));  // there before: kept
}

TEST(NewFolderGuard, KeepsAFolderThatWasThereAsItWasOrWhatTheRunKept) {
  testing::TempDir dir;
  const std::string there = dir.file("there");
  fs::create_directories(there + "/old");
  std::ofstream(there + "/notes.txt") << "mine\n";
  {
    NewFolderGuard guard(there);
    fs::create_directories(there + "/redis");
    std::ofstream(there + "/.kiln.lock") << "";
    std::ofstream(there + "/old/added-inside") << "";
  }
  EXPECT_TRUE(fs::exists(there + "/notes.txt"));
  EXPECT_TRUE(fs::exists(there + "/old/added-inside"));  // under what was there: not looked into
  EXPECT_FALSE(fs::exists(there + "/redis"));            // what the run added goes
  EXPECT_FALSE(fs::exists(there + "/.kiln.lock"));
  {
    NewFolderGuard guard(there);
    fs::create_directories(there + "/redis");
    guard.keep();
  }
  EXPECT_TRUE(fs::exists(there + "/redis"));

  const std::string recorded = dir.file("x/recorded");
  {
    NewFolderGuard guard(recorded);
    fs::create_directories(recorded);
    guard.keep();  // the run is recorded there, or another run holds its lock
  }
  EXPECT_TRUE(fs::exists(recorded));

  { NewFolderGuard guard(""); }  // no folder: nothing to do
  {
    NewFolderGuard guard(dir.file("never-made"));  // the run failed before making it
  }
  EXPECT_FALSE(fs::exists(dir.file("never-made")));
  EXPECT_TRUE(fs::exists(dir.path()));
}

}  // namespace
}  // namespace kiln::cli
