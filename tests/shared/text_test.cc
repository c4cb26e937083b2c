#include "shared/text.h"

#include <gtest/gtest.h>

namespace kiln {
namespace {

// Peer text cannot start a new log line, move the cursor, or pass an escape of its own off as one
// of ours; long text is cut and says how long it was.
TEST(LogSafe, EscapesControlBytesAndBackslashesAndCutsLongText) {
  EXPECT_EQ(log_safe("worker-1"), "worker-1");
  EXPECT_EQ(log_safe("w\n[kiln] forged"), "w\\x0a[kiln] forged");
  EXPECT_EQ(log_safe(std::string("a\x1b[2Jb\r\x7f", 8)), "a\\x1b[2Jb\\x0d\\x7f");
  EXPECT_EQ(log_safe(std::string("\0", 1)), "\\x00");
  EXPECT_EQ(log_safe("\\x0a"), "\\\\x0a");
  EXPECT_EQ(log_safe(std::string(300, 'x'), 10), std::string(10, 'x') + "...(300 bytes)");
  EXPECT_EQ(log_safe("\xc3\xa9t\xc3\xa9"), "\xc3\xa9t\xc3\xa9");  // UTF-8 passes through
}

}  // namespace
}  // namespace kiln
