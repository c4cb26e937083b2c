// read_bounded_file: what it reads and what it refuses, on real files, folders, links, devices,
// fifos and pipes.
#include "shared/bounded_file.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include "tests/support/test_env.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

const FileBounds kJson{64, "a JSON file"};

bool has(const Status& s, const std::string& text) {
  return s.message().find(text) != std::string::npos;
}

TEST(BoundedFile, ReadsARegularFileAndAFileReachedThroughALink) {
  testing::TempDir dir;
  const std::string path = dir.write("a.json", "{\"x\": 1}");
  Result<std::string> got = read_bounded_file(path, kJson);
  ASSERT_TRUE(got.is_ok()) << got.status().to_string();
  EXPECT_EQ(*got, "{\"x\": 1}");
  fs::create_symlink(path, dir.file("link.json"));
  EXPECT_EQ(*read_bounded_file(dir.file("link.json"), kJson), "{\"x\": 1}");
  EXPECT_EQ(*read_bounded_file(dir.write("empty", ""), kJson), "");
}

TEST(BoundedFile, RefusesMissingFilesFoldersLinksWhereNoneMayBeAndTooMuch) {
  testing::TempDir dir;
  Result<std::string> missing = read_bounded_file(dir.file("nope"), kJson);
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(has(missing.status(), dir.file("nope"))) << missing.status().to_string();

  Result<std::string> folder = read_bounded_file(dir.path(), kJson);
  EXPECT_EQ(folder.status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(has(folder.status(), "a folder, where a JSON file was expected"));

  const std::string big = dir.write("big", std::string(65, 'x'));
  Result<std::string> large = read_bounded_file(big, kJson);
  EXPECT_EQ(large.status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(has(large.status(), "larger than the 64 bytes kiln reads of a JSON file"))
      << large.status().to_string();
  EXPECT_TRUE(read_bounded_file(dir.write("exact", std::string(64, 'x')), kJson).is_ok());

  fs::create_symlink(big, dir.file("link"));
  Result<std::string> link =
      read_bounded_file(dir.file("link"), {1024, "a file of an export", false, /*follow=*/false});
  EXPECT_EQ(link.status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(has(link.status(), "a symbolic link, where a file of an export was expected"));
}

// A device or a fifo is refused before a byte is read: /dev/zero would be read without end, and a
// fifo nobody writes to would block. A file that claims no size but holds more than the bound
// (a /proc file) is cut off.
TEST(BoundedFile, RefusesDevicesAndFifosAndCutsOffAFileThatGrowsPastTheBound) {
  testing::TempDir dir;
  Result<std::string> zero = read_bounded_file("/dev/zero", kJson);
  EXPECT_EQ(zero.status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(has(zero.status(), "not a regular file")) << zero.status().to_string();
  ASSERT_EQ(::mkfifo(dir.file("fifo").c_str(), 0600), 0);
  Result<std::string> fifo = read_bounded_file(dir.file("fifo"), kJson);
  EXPECT_EQ(fifo.status().code(), StatusCode::kInvalidArgument);

  Result<std::string> proc = read_bounded_file("/proc/self/status", {16, "a key file"});
  EXPECT_EQ(proc.status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(has(proc.status(), "larger than the 16 bytes")) << proc.status().to_string();
}

// Where pipes are allowed (a secret key given as `<(vault read ...)`, which the program sees as
// /dev/fd/N), a pipe is read up to the bound; a fifo with no writer reads as empty rather than
// blocking.
TEST(BoundedFile, ReadsAPipeWhereStreamsAreAllowedAndStopsAtTheBound) {
  testing::TempDir dir;
  const FileBounds keys{32, "a key file", /*streams=*/true};
  ASSERT_EQ(::mkfifo(dir.file("fifo").c_str(), 0600), 0);
  Result<std::string> none = read_bounded_file(dir.file("fifo"), keys);
  ASSERT_TRUE(none.is_ok()) << none.status().to_string();
  EXPECT_EQ(*none, "");

  auto pipe_holding = [](const std::string& text) {
    int fds[2];
    EXPECT_EQ(::pipe(fds), 0);
    EXPECT_EQ(::write(fds[1], text.data(), text.size()), static_cast<ssize_t>(text.size()));
    ::close(fds[1]);  // the writer is done: the reader gets the bytes, then end of file
    return fds[0];
  };
  const int small = pipe_holding("secret-key abc\n");
  Result<std::string> got = read_bounded_file("/dev/fd/" + std::to_string(small), keys);
  ASSERT_TRUE(got.is_ok()) << got.status().to_string();
  EXPECT_EQ(*got, "secret-key abc\n");
  ::close(small);

  const int large = pipe_holding(std::string(100, 'k'));
  got = read_bounded_file("/dev/fd/" + std::to_string(large), keys);
  EXPECT_EQ(got.status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(has(got.status(), "larger than the 32 bytes")) << got.status().to_string();
  ::close(large);
  // Without streams, the same pipe is refused before it is read.
  const int refused = pipe_holding("x");
  got = read_bounded_file("/dev/fd/" + std::to_string(refused), {32, "a JSON file"});
  EXPECT_EQ(got.status().code(), StatusCode::kInvalidArgument);
  ::close(refused);
}

}  // namespace
}  // namespace kiln
