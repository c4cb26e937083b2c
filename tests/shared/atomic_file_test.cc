// write_file_atomically: the whole content under the path with the mode asked for, no temporary
// left behind, and a clear error where the folder cannot take it. Readers racing with writers are
// what it is for: several writers of one path leave one whole content, never a mix or a part.
#include "shared/atomic_file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "tests/support/test_env.h"

namespace kiln {
namespace {

TEST(AtomicFile, WritesTheWholeContentWithItsModeAndLeavesNoTemporary) {
  testing::TempDir dir;
  const std::string path = dir.file("probe.so");
  ASSERT_TRUE(write_file_atomically(path, "first", 0600).is_ok());
  ASSERT_TRUE(write_file_atomically(path, std::string(100000, 'x'), 0600).is_ok());
  EXPECT_EQ(testing::read_file(path), std::string(100000, 'x'));
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  size_t files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.path()))
    files += e.is_regular_file();
  EXPECT_EQ(files, 1u);
  Status missing = write_file_atomically(dir.file("no/such/folder/x"), "y");
  EXPECT_FALSE(missing.is_ok());
  EXPECT_NE(missing.message().find("no/such/folder"), std::string::npos) << missing.message();
}

TEST(AtomicFile, ReadersNeverSeeAPartWhileWritersRace) {
  testing::TempDir dir;
  const std::string path = dir.file("shared.bin");
  const std::string a(1 << 20, 'a'), b(1 << 20, 'b');
  ASSERT_TRUE(write_file_atomically(path, a).is_ok());
  std::vector<std::thread> writers;
  for (int w = 0; w < 2; ++w) {
    writers.emplace_back([&, w] {
      for (int i = 0; i < 20; ++i) EXPECT_TRUE(write_file_atomically(path, w ? a : b).is_ok());
    });
  }
  for (int i = 0; i < 50; ++i) {
    const std::string seen = testing::read_file(path);
    EXPECT_TRUE(seen == a || seen == b) << "a reader saw " << seen.size() << " bytes";
  }
  for (auto& t : writers) t.join();
}

}  // namespace
}  // namespace kiln
