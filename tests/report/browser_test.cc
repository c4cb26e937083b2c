// The HTML report in a real browser: check_report_browser.py opens the page of the synthetic run
// (sample_run.h) in headless Chromium at 1280 px and checks that it logs no error, draws every
// chart's points, does not scroll sideways and keeps its text readable, and saves a screenshot
// (to $KILN_REPORT_SCREENSHOT when set, to look at). Skipped, saying why, where Chromium or
// python3's websocket module is missing; CI installs both (chromium, python3-websocket).
#include <gtest/gtest.h>

#include <cstdlib>
#include <nlohmann/json.hpp>

#include "report/html.h"
#include "tests/report/sample_run.h"
#include "tests/support/test_env.h"

namespace kiln {
namespace {

using testing::run_command;
using testing::TempDir;

const std::string kScript = std::string(KILN_SOURCE_DIR) + "/tests/report/check_report_browser.py";

// A python3 that can import websocket: the one on PATH, else the system's (a pyenv or venv
// python on PATH does not see Debian's python3-websocket).
std::string python_with_websocket() {
  std::string out;
  for (const char* py : {"python3", "/usr/bin/python3"}) {
    if (run_command(std::string(py) + " -c 'import websocket'", &out) == 0) return py;
  }
  return "";
}

std::string chromium() {
  std::string out;
  if (run_command("command -v chromium", &out) != 0) return "";
  return out.substr(0, out.find('\n'));
}

// Renders `run` and runs the browser check on it with `expected` counts (plot name -> points).
void check_in_browser(const report::RunData& run, const nlohmann::json& expected,
                      const std::string& screenshot_name) {
  const std::string py = python_with_websocket();
  const std::string browser = chromium();
  if (browser.empty()) GTEST_SKIP() << "chromium is not installed (apt-get install chromium)";
  if (py.empty())
    GTEST_SKIP() << "python3's websocket module is missing (apt-get install python3-websocket)";
  TempDir dir;
  const std::string html = dir.write("report.html", report::render_html(run));
  const std::string expect = dir.write("expect.json", expected.dump());
  std::string shot = dir.file(screenshot_name);
  if (const char* keep = std::getenv("KILN_REPORT_SCREENSHOT"); keep && *keep)
    shot = std::string(keep) + "/" + screenshot_name;
  std::string out;
  const int rc = run_command(py + " " + kScript + " --chromium " + browser + " --html " + html +
                                 " --expect @" + expect + " --screenshot " + shot,
                             &out);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("passed"), std::string::npos) << out;
  std::printf("%s", out.c_str());
}

TEST(ReportBrowser, TheSampleRunsPageRendersCleanlyAt1280Pixels) {
  const std::string rms = std::string("rmsnorm@") + testing::kModel;
  const std::string mat = std::string("matmul@") + testing::kModel;
  const nlohmann::json expected = {
      {rms + "/time", 12},  {rms + "/evals", 12},    {rms + "/roofline", 12}, {mat + "/time", 10},
      {mat + "/evals", 10}, {mat + "/roofline", 10}, {"farm/workers", 28}};
  check_in_browser(testing::sample_run(), expected, "report-sample.png");
}

TEST(ReportBrowser, AnEmptyRunsPageRendersCleanly) {
  report::RunData run;
  run.source = "kiln-run";
  check_in_browser(run, nlohmann::json::object(), "report-empty.png");
}

}  // namespace
}  // namespace kiln
