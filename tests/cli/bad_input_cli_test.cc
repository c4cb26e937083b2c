// Inputs found by trying to break the `kiln` binary as a hostile user would: each one crashed it,
// aborted it, ran something other than what was asked, or left files behind. Each now gets a
// clear error (exit code 2 for bad usage) and changes nothing.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/support/test_env.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using testing::kiln_binary;
using testing::run_command;

// `--name=` with nothing after it took the next argument as its value (`export --to= --no-verify`
// wrote a folder named --no-verify); an option given an empty value (an unset shell variable)
// was taken as not given, so `--source ''` evaluated the seed.
TEST(BadInput, AnOptionWithoutAValueIsRefusedNotFilledFromTheNextArgument) {
  testing::TempDir dir;
  std::string text;
  const std::string eval =
      kiln_binary() + " eval reduce --backend cpu --no-time --cache-dir " + dir.file("cache") + " ";
  EXPECT_EQ(run_command(eval + "--dtype= --json 2>&1", &text), 2) << text;
  EXPECT_NE(text.find("--dtype= gives the option no value"), std::string::npos) << text;
  EXPECT_EQ(run_command(eval + "--source '' 2>&1", &text), 2) << text;
  EXPECT_NE(text.find("--source was given an empty value"), std::string::npos) << text;
  EXPECT_FALSE(fs::exists(dir.file("cache"))) << "nothing ran: " << text;
}

TEST(BadInput, WhatOneCommandWouldStartIsBounded) {
  testing::TempDir dir;
  std::string text;
  EXPECT_EQ(run_command(kiln_binary() + " targets --check --backend cpu --jobs 100000 reduce 2>&1",
                        &text),
            2)
      << text;  // was: std::terminate from the 100000th thread
  EXPECT_NE(text.find("--jobs"), std::string::npos) << text;
  for (const char* command :
       {" run --evaluators 100000", " run --islands 5000", " coordinator --in-flight 1000000"}) {
    EXPECT_EQ(run_command(kiln_binary() + command + " --backend cpu --targets reduce --out " +
                              dir.file("run") + " 2>&1",
                          &text),
              2)
        << command << ": " << text;
    EXPECT_NE(text.find("at most"), std::string::npos) << command << ": " << text;
  }
  EXPECT_FALSE(fs::exists(dir.file("run")));
}

TEST(BadInput, EveryCommandRefusesABackendItDoesNotKnow) {
  std::string text;
  EXPECT_EQ(run_command(kiln_binary() + " targets --check --backend bogus reduce 2>&1", &text), 2)
      << text;  // was: "0 kernel(s) checked: 0 problem(s)", exit 0
  EXPECT_NE(text.find("bogus"), std::string::npos) << text;
  EXPECT_EQ(run_command(kiln_binary() + " eval reduce --backend CPU 2>&1", &text), 2) << text;
  EXPECT_NE(text.find("cuda,cpu,triton"), std::string::npos) << text;
  EXPECT_EQ(run_command(kiln_binary() + " eval rmsnorm --backend cpu --dtype f16 2>&1", &text), 2)
      << text;  // was: result internal_error, exit 1
  EXPECT_NE(text.find("--dtype f16: the cpu kernels of rmsnorm take f32"), std::string::npos)
      << text;
}

// A target whose target.json names another target was listed under a name no lookup finds, and
// evaluated when its folder's name was asked for.
TEST(BadInput, ATargetMustCarryItsFoldersName) {
  testing::TempDir dir;
  const std::string mine = dir.file("mine");
  fs::create_directories(mine);
  fs::copy(testing::builtin_targets_dir() + "/reduce", mine + "/reduce",
           fs::copy_options::recursive);
  nlohmann::json spec = testing::read_json(mine + "/reduce/target.json");
  spec["name"] = "other";
  std::ofstream(mine + "/reduce/target.json") << spec.dump(2);
  std::string text;
  EXPECT_EQ(run_command(kiln_binary() + " targets --targets-dir " + mine + " 2>&1", &text), 2)
      << text;
  EXPECT_NE(text.find("'other' is not its folder's name 'reduce'"), std::string::npos) << text;
  EXPECT_EQ(run_command(kiln_binary() + " eval reduce --backend cpu --no-time --targets-dir " +
                            mine + " 2>&1",
                        &text),
            2)
      << text;
  EXPECT_NE(text.find("'other' is not its folder's name 'reduce'"), std::string::npos) << text;
}

TEST(BadInput, ASourceThatIsAFolderEmptyOrFullOfEscapesIsSaidPlainly) {
  testing::TempDir dir;
  const std::string eval = kiln_binary() + " eval reduce --backend cpu --no-time --cache-dir " +
                           dir.file("cache") + " --source ";
  std::string text;
  EXPECT_EQ(run_command(eval + dir.path() + " 2>&1", &text), 2) << text;
  EXPECT_NE(text.find("is a folder; name the kernel's source file"), std::string::npos) << text;
  // An empty file defines no entry point (it was said to "import" it).
  std::ofstream(dir.file("empty.cpp")) << "";
  EXPECT_EQ(run_command(eval + dir.file("empty.cpp") + " 2>&1", &text), 1) << text;
  EXPECT_NE(text.find("does not define the kernel's entry point 'reduce_seed'"), std::string::npos)
      << text;
  // Control characters in the source reach the terminal escaped, not raw.
  std::ofstream(dir.file("esc.cpp")) << "#include <\x1b[31mred\x07>\n";
  EXPECT_EQ(run_command(eval + dir.file("esc.cpp") + " 2>&1", &text), 1) << text;
  EXPECT_EQ(text.find('\x1b'), std::string::npos) << text;
  EXPECT_EQ(text.find('\x07'), std::string::npos) << text;
  EXPECT_NE(text.find("\\x1b[31mred\\x07"), std::string::npos) << text;
}

// A folder with a space in its path: the private Redis's config took the path as two words and
// redis-server refused to start, so no run could start there. Then the run's records, changed by
// hand to hold the wrong types, and a summary that is a folder: each an error that names the
// file, where they were uncaught exceptions.
TEST(BadInput, ARunInAPathWithASpaceAndItsRecordsChangedByHand) {
  testing::TempDir dir;
  const std::string run = dir.file("my runs/first run");
  std::string text;
  ASSERT_EQ(
      run_command(kiln_binary() + " run --backend cpu --targets reduce --budget 5s " +
                      "--patience 2 --cache-dir " + dir.file("cache") + " --out '" + run + "' 2>&1",
                  &text),
      0)
      << text;
  ASSERT_TRUE(fs::exists(run + "/best/reduce.json")) << text;

  const std::string q = "'" + run + "'";
  EXPECT_EQ(run_command(kiln_binary() + " export reduce --out " + q + " --to " +
                            dir.file("exported") + " --no-verify 2>&1",
                        &text),
            0)
      << text;
  nlohmann::json record = testing::read_json(dir.file("exported/kiln-export.json"));
  record["dtype"] = 5;
  std::ofstream(dir.file("exported/kiln-export.json")) << record.dump(2);
  EXPECT_EQ(run_command(kiln_binary() + " verify " + dir.file("exported") + " 2>&1", &text), 2)
      << text;
  EXPECT_NE(text.find("kiln-export.json: a field does not hold what kiln writes"),
            std::string::npos)
      << text;

  nlohmann::json best = testing::read_json(run + "/best/reduce.json");
  best["source"] = 5;
  std::ofstream(run + "/best/reduce.json") << best.dump(2);
  EXPECT_EQ(run_command(kiln_binary() + " export reduce --out " + q + " --to " + dir.file("again") +
                            " --no-verify 2>&1",
                        &text),
            2)
      << text;
  EXPECT_NE(text.find("reduce.json: a field does not hold what kiln writes"), std::string::npos)
      << text;
  EXPECT_FALSE(fs::exists(dir.file("again"))) << text;

  fs::remove(run + "/summary.json");
  fs::create_directories(run + "/summary.json");
  EXPECT_EQ(run_command(kiln_binary() + " status --out " + q + " 2>&1", &text), 2) << text;
  EXPECT_NE(text.find("a folder, where a JSON file was expected"), std::string::npos) << text;
}

TEST(BadInput, ARunWhoseLlmConfigCannotBeReadStartsNothing) {
  testing::TempDir dir;
  std::string text;
  EXPECT_EQ(run_command(kiln_binary() + " run --backend cpu --targets reduce --llm " +
                            dir.file("nope.json") + " --out " + dir.file("run") + " 2>&1",
                        &text),
            2)
      << text;  // was: a run that started the LLM agent again and again
  EXPECT_NE(text.find("--llm: "), std::string::npos) << text;
  EXPECT_FALSE(fs::exists(dir.file("run"))) << text;
}

}  // namespace
}  // namespace kiln
