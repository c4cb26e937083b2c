#include "shared/text.h"

#include <gtest/gtest.h>

#include <string>

namespace kiln {
namespace {

// Numbers from users, files and models: the whole text is the integer, or there is none.
TEST(ParseInt64, TakesWholeIntegersOnly) {
  EXPECT_EQ(parse_int64("16"), 16);
  EXPECT_EQ(parse_int64("-4"), -4);
  EXPECT_EQ(parse_int64("0256"), 256);
  EXPECT_EQ(parse_int64("9223372036854775807"), INT64_MAX);
  for (const char* bad : {"", "-", "--", "+4", " 4", "4 ", "1e3", "16x", "1-2", "2.5",
                          "9223372036854775808", "99999999999999999999"}) {
    EXPECT_FALSE(parse_int64(bad).has_value()) << "'" << bad << "'";
  }
}

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

TEST(LogSafe, ANewlineCannotStartAForgedLogLine) {
  const std::string forged = "t-1\n2026-11-24 03:00:00.000 info  [coordinator:1] best crowned";
  const std::string safe = log_safe(forged);
  EXPECT_EQ(safe.find('\n'), std::string::npos);
  EXPECT_EQ(safe, "t-1\\x0a2026-11-24 03:00:00.000 info  [coordinator:1] best crowned");
}

TEST(LogSafe, ControlBytesDelAndTerminalEscapesAreWrittenAsHex) {
  EXPECT_EQ(log_safe("a\rb\tc\x1b[2Jd\x7f"
                     "e"),
            "a\\x0db\\x09c\\x1b[2Jd\\x7fe");
  EXPECT_EQ(log_safe(std::string("nul\0here", 8)), "nul\\x00here");
}

TEST(LogSafe, ABackslashIsDoubledSoEscapesAreUnambiguous) {
  // A peer that sends the four characters \x0a must not look like one that sent a newline.
  EXPECT_EQ(log_safe("\\x0a"), "\\\\x0a");
}

TEST(LogSafe, ValidUtf8PassesAndBrokenOrC1BytesAreEscaped) {
  EXPECT_EQ(log_safe("NVIDIA H100 — 80 GB µs ✓"), "NVIDIA H100 — 80 GB µs ✓");
  EXPECT_EQ(log_safe("bad \xff byte"), "bad \\xff byte");
  EXPECT_EQ(log_safe("cut \xe2\x80"), "cut \\xe2\\x80");            // truncated sequence
  EXPECT_EQ(log_safe("overlong \xc0\xaf"), "overlong \\xc0\\xaf");  // '/' in two bytes
  EXPECT_EQ(log_safe("csi \xc2\x9b"
                     "2J"),
            "csi \\xc2\\x9b2J");  // U+009B, a C1 control
}

TEST(LogSafe, LongTextIsCutWithAMarkerThatSaysHowMuchWasLeftOut) {
  const std::string log(10000, 'x');
  const std::string safe = log_safe(log, 100);
  EXPECT_EQ(safe.substr(0, 100), std::string(100, 'x'));
  EXPECT_EQ(safe.substr(100), "...(10000 bytes)");
  EXPECT_EQ(log_safe("short", 100), "short");
  EXPECT_EQ(log_safe("", 100), "");
}

TEST(LogSafe, TheCutNeverSplitsAnEscapeOrAUtf8Sequence) {
  // "ab" then a newline (4 bytes escaped): a limit of 4 keeps "ab" and leaves the escape whole out.
  EXPECT_EQ(log_safe("ab\ncd", 4), "ab...(5 bytes)");
  EXPECT_EQ(log_safe("ab\xc2\xb5"
                     "cd",
                     3),
            "ab...(6 bytes)");  // µ is two bytes
  EXPECT_EQ(log_safe("ab\xc2\xb5"
                     "cd",
                     4),
            "ab\xc2\xb5...(6 bytes)");
}

}  // namespace
}  // namespace kiln
