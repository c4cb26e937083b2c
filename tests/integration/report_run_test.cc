// A real `kiln run` (cpu backend) watched over its --http endpoints while it runs, then turned into
// a report by `kiln report`, and the report checked in headless Chromium against the numbers the
// run itself wrote: each plot has as many points as results.jsonl has timed results.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "tests/support/http_client.h"
#include "tests/support/test_env.h"

namespace kiln {
namespace {

using namespace std::chrono_literals;
using testing::run_command;

std::string python_with_websocket() {
  std::string out;
  for (const char* py : {"python3", "/usr/bin/python3"}) {
    if (run_command(std::string(py) + " -c 'import websocket'", &out) == 0) return py;
  }
  return "";
}

TEST(KilnReport, ARealRunIsServedWhileItRunsAndItsReportShowsEveryResult) {
  testing::TempDir dir;
  const std::string out = dir.path() + "/run";
  std::string run_output;
  std::thread run([&] {
    run_command(testing::kiln_binary() +
                    " run --targets reduce --backend cpu --budget 120s --patience 4 --http " +
                    "127.0.0.1:0 --out " + out + " --cache-dir " + dir.path() +
                    "/cache 2>&1; echo rc=$?",
                &run_output);
  });
  // While it runs: the address it bound is in <out>/http, and its endpoints answer.
  std::string url;
  for (int i = 0; i < 600 && url.empty(); ++i) {
    std::this_thread::sleep_for(100ms);
    std::ifstream f(out + "/http");
    std::getline(f, url);
  }
  int metrics_status = -1, status_status = -1, ready_status = -1;
  std::string metrics;
  if (!url.empty()) {
    const uint16_t port = static_cast<uint16_t>(std::stoi(url.substr(url.rfind(':') + 1)));
    testing::HttpReply m = testing::http_get(port, "/metrics");
    metrics_status = m.status;
    metrics = m.body;
    status_status = testing::http_get(port, "/status").status;
    ready_status = testing::http_get(port, "/readyz").status;
  }
  run.join();
  ASSERT_NE(run_output.find("rc=0"), std::string::npos) << run_output;
  ASSERT_FALSE(url.empty()) << "no " << out << "/http: " << run_output;
  EXPECT_NE(run_output.find("status page " + url), std::string::npos) << run_output;
  EXPECT_EQ(metrics_status, 200);
  EXPECT_EQ(status_status, 200);
  EXPECT_EQ(ready_status, 200);
  const std::string metrics_file = dir.write("metrics.txt", metrics);
  std::string promtool;
  EXPECT_EQ(run_command("promtool check metrics < " + metrics_file + " 2>&1", &promtool), 0)
      << promtool;

  // The report, and what it must show: the run's own results.
  std::string report_output;
  ASSERT_EQ(run_command(testing::kiln_binary() + " report " + out + " 2>&1", &report_output), 0)
      << report_output;
  std::ifstream results(out + "/results.jsonl");
  std::string line;
  std::map<std::string, int> timed;
  int rows = 0;
  while (std::getline(results, line)) {
    nlohmann::json r = nlohmann::json::parse(line);
    ++rows;
    EXPECT_TRUE(r.contains("at_s")) << line.substr(0, 200);
    EXPECT_TRUE(r.contains("op")) << line.substr(0, 200);
    if (r["timing"].value("median_us", 0.0) > 0) ++timed[r["target"].get<std::string>()];
  }
  ASSERT_GT(timed["reduce"], 2);
  nlohmann::json expected = {{"reduce/time", timed["reduce"]},
                             {"reduce/evals", timed["reduce"]},
                             {"reduce/roofline", timed["reduce"]},
                             {"farm/workers", rows}};
  std::string md;
  ASSERT_EQ(run_command(testing::kiln_binary() + " report " + out + " --format md", &md), 0) << md;
  EXPECT_NE(md.find("## reduce"), std::string::npos) << md;
  EXPECT_NE(md.find("kiln export reduce"), std::string::npos) << md;

  std::string browser;
  const std::string py = python_with_websocket();
  if (run_command("command -v chromium", &browser) != 0)
    GTEST_SKIP() << "chromium is not installed";
  if (py.empty())
    GTEST_SKIP() << "python3's websocket module is missing (apt-get install python3-websocket)";
  const std::string expect = dir.write("expect.json", expected.dump());
  std::string check;
  EXPECT_EQ(run_command(py + " " + std::string(KILN_SOURCE_DIR) +
                            "/tests/report/check_report_browser.py --html " + out +
                            "/report.html --expect @" + expect + " --screenshot " + dir.path() +
                            "/shot.png 2>&1",
                        &check),
            0)
      << check;
}

}  // namespace
}  // namespace kiln
