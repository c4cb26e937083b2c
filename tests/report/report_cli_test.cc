// `kiln report` through the real binary: on a run folder it writes the page (or markdown) and
// says where; on a folder that is not a run it exits non-zero saying what to pass.
#include <gtest/gtest.h>

#include <filesystem>

#include "tests/report/sample_run.h"
#include "tests/support/test_env.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using testing::kiln_binary;
using testing::read_file;
using testing::run_command;
using testing::TempDir;

TEST(ReportCli, WritesTheHtmlReportIntoTheRunFolderByDefault) {
  TempDir dir;
  const std::string run = dir.path() + "/run";
  testing::write_run_folder(testing::sample_run(), run);
  std::string out;
  ASSERT_EQ(run_command(kiln_binary() + " report " + run, &out), 0) << out;
  EXPECT_NE(out.find("wrote " + run + "/report.html (2 targets, 28 results)"), std::string::npos)
      << out;
  EXPECT_NE(out.find("file://"), std::string::npos) << out;
  const std::string html = read_file(run + "/report.html");
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_NE(html.find("data-plot=\"farm/workers\" data-points=\"28\""), std::string::npos);
  EXPECT_FALSE(fs::exists(run + "/report.html.tmp"));
}

TEST(ReportCli, RunAndOutNameTheFolderAndTheFile) {
  TempDir dir;
  const std::string run = dir.path() + "/run";
  testing::write_run_folder(testing::sample_run(), run);
  const std::string file = dir.path() + "/pages/night1.html";
  std::string out;
  ASSERT_EQ(run_command(kiln_binary() + " report --run " + run + " --out " + file, &out), 0) << out;
  EXPECT_NE(read_file(file).find("</html>"), std::string::npos);
  EXPECT_FALSE(fs::exists(run + "/report.html"));
}

TEST(ReportCli, MarkdownGoesToStdout) {
  TempDir dir;
  const std::string run = dir.path() + "/run";
  testing::write_run_folder(testing::sample_run(), run);
  std::string out;
  ASSERT_EQ(run_command(kiln_binary() + " report " + run + " --format md", &out), 0) << out;
  EXPECT_EQ(out.rfind("# kiln report: run-20250101-0001", 0), 0u) << out;
  EXPECT_NE(out.find("## Summary"), std::string::npos);
  EXPECT_FALSE(fs::exists(run + "/report.html"));
}

TEST(ReportCli, ANonRunFolderExitsNonZeroSayingWhatToPass) {
  TempDir dir;
  std::string out;
  const int rc = run_command(kiln_binary() + " report " + dir.path(), &out);
  EXPECT_EQ(rc, 2) << out;
  EXPECT_NE(out.find("kiln report: " + dir.path() + " is not a kiln run folder"), std::string::npos)
      << out;
  EXPECT_NE(out.find("kiln run --out"), std::string::npos) << out;
  EXPECT_FALSE(fs::exists(dir.path() + "/report.html"));
}

TEST(ReportCli, TwoDifferentFoldersAreRefused) {
  TempDir dir;
  std::string out;
  EXPECT_EQ(run_command(kiln_binary() + " report a --run b", &out), 2) << out;
  EXPECT_NE(out.find("two run folders"), std::string::npos) << out;
}

TEST(ReportCli, HelpSaysWhatIsInTheReportAndHowToCallIt) {
  std::string out;
  ASSERT_EQ(run_command(kiln_binary() + " report --help", &out), 0) << out;
  for (const char* s : {"--run", "--out", "--format", "lineage", "kiln report runs/night1"})
    EXPECT_NE(out.find(s), std::string::npos) << s << " missing from\n" << out;
}

}  // namespace
}  // namespace kiln
