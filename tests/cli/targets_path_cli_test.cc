// A user's own targets beside the built-in ones (--targets-dir A:B, $KILN_TARGETS_DIR), through
// the real `kiln` binary: listed together, looked up by name, searched in one run.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "shared/target_spec.h"
#include "tests/support/test_env.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using kiln::testing::kiln_binary;
using kiln::testing::run_command;

// mine/mykernel: the built-in reduce under another name, with a small cpu benchmark.
std::string own_targets(const testing::TempDir& dir) {
  const std::string mine = dir.file("mine");
  fs::create_directories(mine);
  fs::copy(default_targets_dir() + "/reduce", mine + "/mykernel", fs::copy_options::recursive);
  std::ifstream in(mine + "/mykernel/target.json");
  nlohmann::json spec = nlohmann::json::parse(in);
  spec["name"] = "mykernel";
  std::ofstream(mine + "/mykernel/target.json") << spec.dump(2);
  return mine;
}

TEST(TargetsPathCli, OwnAndBuiltInTargetsAreListedAndFoundTogether) {
  testing::TempDir dir;
  const std::string mine = own_targets(dir);
  std::string text;
  ASSERT_EQ(run_command(kiln_binary() + " targets --targets-dir " + mine + " 2>&1", &text), 0)
      << text;
  EXPECT_NE(text.find("mykernel"), std::string::npos) << text;
  EXPECT_NE(text.find("softmax"), std::string::npos) << text;
  EXPECT_NE(text.find(mine), std::string::npos) << text;  // where they came from

  ASSERT_EQ(run_command(
                "KILN_TARGETS_DIR=" + mine + " " + kiln_binary() + " targets mykernel reduce 2>&1",
                &text),
            0)
      << text;
  EXPECT_NE(text.find("2 targets"), std::string::npos) << text;

  // An unknown name says where it was looked for.
  EXPECT_EQ(run_command(kiln_binary() + " eval nosuch --targets-dir " + mine + " 2>&1", &text), 2)
      << text;
  EXPECT_NE(text.find("no target 'nosuch'"), std::string::npos) << text;
  EXPECT_NE(text.find(mine), std::string::npos) << text;

  // A run with a misspelt target stops before it makes its folder or starts a Redis there (it
  // left OUT/redis behind).
  const std::string typo = dir.file("typo-run");
  EXPECT_EQ(
      run_command(kiln_binary() + " run --backend cpu --targets mykernel,nosuch --targets-dir " +
                      mine + " --out " + typo + " 2>&1",
                  &text),
      2)
      << text;
  EXPECT_NE(text.find("no target 'nosuch'"), std::string::npos) << text;
  EXPECT_FALSE(fs::exists(typo)) << text;
  // Any failure before the run is recorded, here a --shapes file that does not parse (parsed
  // after Redis has started), removes the folder and the parents it made, and only those: a
  // folder that was there before keeps what it held.
  std::ofstream(dir.file("bad-shapes.json")) << "{not json";
  const std::string bad_shapes = " run --backend cpu --targets mykernel --targets-dir " + mine +
                                 " --shapes " + dir.file("bad-shapes.json") + " --out ";
  EXPECT_EQ(run_command(kiln_binary() + bad_shapes + dir.file("made/deep/out/") + " 2>&1", &text),
            2)
      << text;
  EXPECT_NE(text.find("--shapes: "), std::string::npos) << text;
  EXPECT_NE(text.find("bad-shapes.json"), std::string::npos) << text;
  EXPECT_FALSE(fs::exists(dir.file("made"))) << text;
  const std::string before = dir.file("before");
  fs::create_directories(before);
  std::ofstream(before + "/notes.txt") << "mine\n";
  EXPECT_EQ(run_command(kiln_binary() + bad_shapes + before + " 2>&1", &text), 2) << text;
  EXPECT_TRUE(fs::exists(before + "/notes.txt")) << text;
  // The run got as far as its Redis and its lock; they go, as the folder was before.
  EXPECT_FALSE(fs::exists(before + "/redis")) << text;
  EXPECT_FALSE(fs::exists(before + "/.kiln.lock")) << text;
}

// A reference's kiln_reference_terms is called only where a tolerance gives `terms`: --check says
// so when none does, and is quiet about the built-in target that uses it.
TEST(TargetsPathCli, CheckWarnsOfAReferenceTermsFunctionThatIsNeverCalled) {
  testing::TempDir dir;
  const std::string mine = dir.file("mine");
  fs::create_directories(mine);
  fs::copy(default_targets_dir() + "/flash_attention", mine + "/myattn",
           fs::copy_options::recursive);
  std::ifstream in(mine + "/myattn/target.json");
  nlohmann::json spec = nlohmann::json::parse(in);
  spec["name"] = "myattn";
  for (auto& [dtype, tol] : spec["tolerance"].items()) tol.erase("terms");
  std::ofstream(mine + "/myattn/target.json") << spec.dump(2);
  const std::string check =
      kiln_binary() + " targets --backend cpu --cache-dir " + dir.file("cache") + " --check ";
  std::string text;
  ASSERT_EQ(run_command(check + mine + "/myattn 2>&1", &text), 0) << text;
  EXPECT_NE(text.find("WARN reference: exports kiln_reference_terms, but no tolerance gives"),
            std::string::npos)
      << text;
  ASSERT_EQ(run_command(check + "flash_attention 2>&1", &text), 0) << text;
  EXPECT_EQ(text.find("WARN"), std::string::npos) << text;
}

TEST(TargetsPathCli, ARunSearchesAnOwnTargetAndABuiltInOneTogether) {
  testing::TempDir dir;
  const std::string mine = own_targets(dir);
  const std::string out = dir.file("run");
  std::string text;
  ASSERT_EQ(
      run_command(kiln_binary() + " run --backend cpu --targets reduce,mykernel --targets-dir " +
                      mine + " --patience 2 --budget 20s --evaluators 1 --out " + out +
                      " --cache-dir " + dir.file("cache") + " 2>&1",
                  &text),
      0)
      << text;
  std::ifstream in(out + "/summary.json");
  nlohmann::json summary = nlohmann::json::parse(in, nullptr, false);
  ASSERT_TRUE(summary.is_array() && summary.size() == 2) << text;
  for (const auto& t : summary) EXPECT_GT(t["evaluations"].get<int>(), 0) << t.dump();
}

// A seed with defines of its own (target.json's "defines") is still the seed: its task names the
// seed's entry point and geometry, not the template's (the coordinator once chose by whether a
// task carried any parameters).
TEST(TargetsPathCli, ASeedWithItsOwnDefinesIsEvaluatedAsTheSeed) {
  testing::TempDir dir;
  const std::string mine = dir.file("mine");
  fs::create_directories(mine);
  fs::copy(default_targets_dir() + "/reduce", mine + "/seeddef", fs::copy_options::recursive);
  nlohmann::json spec = nlohmann::json::parse(std::ifstream(mine + "/seeddef/target.json"));
  spec["name"] = "seeddef";
  spec["backends"]["cpu"]["seed"]["defines"] = {{"SEED_LANES", "1"}};
  std::ofstream(mine + "/seeddef/target.json") << spec.dump(2);
  const std::string out = dir.file("run");
  std::string text;
  ASSERT_EQ(run_command(kiln_binary() + " run --backend cpu --targets seeddef --targets-dir " +
                            mine + " --patience 2 --budget 15s --evaluators 1 --out " + out +
                            " --cache-dir " + dir.file("cache") + " 2>&1",
                        &text),
            0)
      << text;
  nlohmann::json summary =
      nlohmann::json::parse(std::ifstream(out + "/summary.json"), nullptr, false);
  ASSERT_TRUE(summary.is_array() && summary.size() == 1) << text;
  EXPECT_GT(summary[0]["seed_us"].get<double>(), 0) << summary.dump();  // the seed verified
  EXPECT_GT(summary[0]["evaluations"].get<int>(), 1) << summary.dump();
}

}  // namespace
}  // namespace kiln
