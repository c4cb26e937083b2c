// The targets lookup path: a user's folders (--targets-dir A:B or A,B, else $KILN_TARGETS_DIR),
// then the built-in folder; the first folder holding a name wins.
#include "shared/target_path.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "tests/support/test_env.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

// A copy of the built-in reduce target under `root` named `name` (its folder and its spec).
void copy_reduce(const std::string& root, const std::string& name, const std::string& note = "") {
  fs::create_directories(root);
  fs::copy(default_targets_dir() + "/reduce", root + "/" + name, fs::copy_options::recursive);
  std::ifstream in(root + "/" + name + "/target.json");
  nlohmann::json spec = nlohmann::json::parse(in);
  spec["name"] = name;
  if (!note.empty()) spec["description"] = note;
  std::ofstream(root + "/" + name + "/target.json") << spec.dump(2);
}

class TargetPath : public ::testing::Test {
 protected:
  void SetUp() override { unsetenv("KILN_TARGETS_DIR"); }
  void TearDown() override { unsetenv("KILN_TARGETS_DIR"); }
  testing::TempDir dir_;
};

TEST_F(TargetPath, OwnFoldersComeFirstAndTheBuiltInFolderLast) {
  const std::string a = dir_.file("a"), b = dir_.file("b");
  copy_reduce(a, "mykernel");
  copy_reduce(b, "reduce", "a user's copy");
  EXPECT_EQ(target_folders(""), std::vector<std::string>{default_targets_dir()});
  EXPECT_EQ(target_folders(a + ":" + b), (std::vector<std::string>{a, b, default_targets_dir()}));
  EXPECT_EQ(target_folders(a + "," + b), target_folders(a + ":" + b));

  // Own and built-in targets together; a user's copy shadows the built-in one.
  Result<std::string> mine = find_target(a + ":" + b, "mykernel");
  ASSERT_TRUE(mine.is_ok()) << mine.status().message();
  EXPECT_EQ(*mine, a + "/mykernel");
  Result<std::string> softmax = find_target(a + ":" + b, "softmax");
  ASSERT_TRUE(softmax.is_ok()) << softmax.status().message();
  EXPECT_EQ(*softmax, default_targets_dir() + "/softmax");
  EXPECT_EQ(*find_target(a + ":" + b, "reduce"), b + "/reduce");
  EXPECT_EQ(*find_target(a, "reduce"), default_targets_dir() + "/reduce");
  // A folder holding a target.json is taken as it is.
  EXPECT_EQ(*find_target("", a + "/mykernel"), a + "/mykernel");

  // Unknown names, and names that try to leave the folders, name where they were looked for.
  for (const std::string bad : {"nosuch", "../a/mykernel", ".."}) {
    Result<std::string> r = find_target(a, bad);
    ASSERT_FALSE(r.is_ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kNotFound) << bad;
    EXPECT_NE(r.status().message().find(a), std::string::npos) << r.status().message();
    EXPECT_NE(r.status().message().find(default_targets_dir()), std::string::npos);
  }
  // A path says what is wrong with it: missing, a file, or a folder without a target.json.
  const std::string file = dir_.file("plain.txt");
  std::ofstream(file) << "x";
  for (const auto& [path, says] :
       {std::pair<std::string, std::string>{dir_.file("gone"), "(it does not exist)"},
        {file, "is a file, not a target folder"},
        {a, "holds no target.json"}}) {
    Result<std::string> r = find_target(a, path);
    ASSERT_FALSE(r.is_ok()) << path;
    EXPECT_NE(r.status().message().find(says), std::string::npos) << r.status().message();
  }
}

TEST_F(TargetPath, TheEnvironmentNamesFoldersWhenTheCommandLineDoesNot) {
  const std::string a = dir_.file("a"), b = dir_.file("b");
  copy_reduce(a, "mykernel");
  copy_reduce(b, "other");
  setenv("KILN_TARGETS_DIR", (a + ":" + b).c_str(), 1);
  EXPECT_TRUE(has_own_targets(""));
  EXPECT_EQ(*find_target("", "other"), b + "/other");
  // --targets-dir replaces the environment's folders.
  EXPECT_FALSE(find_target(a, "other").is_ok());
}

TEST_F(TargetPath, LoadsEveryTargetOnceOrOnlyTheOwnOnes) {
  const std::string a = dir_.file("a");
  copy_reduce(a, "mykernel");
  copy_reduce(a, "reduce", "a user's copy");
  Result<std::vector<TargetSpec>> own = load_target_path(a, /*own_only=*/true);
  ASSERT_TRUE(own.is_ok()) << own.status().message();
  ASSERT_EQ(own->size(), 2u);
  EXPECT_EQ((*own)[0].name, "mykernel");
  EXPECT_EQ((*own)[1].name, "reduce");

  Result<std::vector<TargetSpec>> all = load_target_path(a, /*own_only=*/false);
  Result<std::vector<TargetSpec>> builtin = load_target_path("", /*own_only=*/true);
  ASSERT_TRUE(all.is_ok() && builtin.is_ok());
  EXPECT_EQ(all->size(), builtin->size() + 1);  // mykernel; reduce once, the user's
  for (const TargetSpec& t : *all) {
    if (t.name == "reduce") {
      EXPECT_EQ(t.description, "a user's copy");
    }
  }
  EXPECT_FALSE(load_target_path(dir_.file("missing"), true).is_ok());
  // A misspelt folder is said, not passed over for the built-in target of that name.
  Result<std::string> found = find_target(dir_.file("missing"), "reduce");
  ASSERT_FALSE(found.is_ok());
  EXPECT_NE(found.status().message().find("missing does not exist (--targets-dir)"),
            std::string::npos)
      << found.status().message();
}

}  // namespace
}  // namespace kiln
