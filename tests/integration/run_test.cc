// `kiln run` end to end on the cpu backend, as a user runs it: a real process that starts its own
// redis-server, two `kiln evaluator` processes and the search, then writes the output folder.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/support/test_env.h"

namespace kiln {
namespace {

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in, nullptr, false);
}

TEST(KilnRun, FindsAFasterReduceThanItsSeedWithTwoEvaluatorsAndWritesTheOutput) {
  testing::TempDir dir;
  const std::string out = dir.path() + "/run";
  std::string output;
  const std::string cmd = testing::kiln_binary() + " run --targets reduce,rmsnorm --backend cpu" +
                          " --evaluators 2 --budget 240s --patience 8 --out " + out +
                          " --cache-dir " + dir.path() + "/cache --targets-dir " KILN_SOURCE_DIR "/targets 2>&1";
  const int rc = testing::run_command(cmd, &output);
  ASSERT_EQ(rc, 0) << output;

  nlohmann::json summary = read_json(out + "/summary.json");
  ASSERT_TRUE(summary.is_array()) << output;
  ASSERT_EQ(summary.size(), 2u);
  // Both templates beat their seeds by 2-4x when timed alone (independent accumulators against
  // one dependent chain), but two evaluators share this machine's cores, and a child is kept only
  // when it is faster by more than the measured noise and a new best again when re-timed: at
  // least one of the two targets must have crowned a template configuration.
  std::string improved;
  for (const auto& t : summary) {
    EXPECT_GT(t["seed_us"].get<double>(), 0) << t.dump();
    EXPECT_GT(t["evaluations"].get<int>(), 1) << t.dump();
    EXPECT_NE(t["state"].get<std::string>().find("converged"), std::string::npos) << t.dump();
    EXPECT_LE(t["best_us"].get<double>(), t["seed_us"].get<double>()) << t.dump();
    if (t["best_us"].get<double>() < t["seed_us"].get<double>()) improved = t["target"];
  }
  ASSERT_FALSE(improved.empty()) << summary.dump(1) << "\n" << output;
  nlohmann::json best = read_json(out + "/best/" + improved + ".json");
  ASSERT_TRUE(best.is_object());
  EXPECT_FALSE(best["source"].get<std::string>().empty());
  EXPECT_TRUE(best["params"].contains("UNROLL")) << best.dump();
  EXPECT_NE(best["best"].get<std::string>().find("template"), std::string::npos) << best.dump();
  EXPECT_EQ(best["verification"]["outcome"], "verified") << best.dump();

  // Every result once: no candidate id appears twice except a crowned best's re-time.
  std::ifstream lines(out + "/results.jsonl");
  std::string line;
  size_t n = 0;
  while (std::getline(lines, line)) {
    nlohmann::json r = nlohmann::json::parse(line, nullptr, false);
    ASSERT_FALSE(r.is_discarded()) << line;
    ++n;
  }
  EXPECT_GE(n, 4u);
  for (const char* f : {"/evaluator-0.log", "/evaluator-1.log", "/redis"}) {
    EXPECT_TRUE(std::ifstream(out + f).good() || std::filesystem::is_directory(out + f)) << f;
  }
}

}  // namespace
}  // namespace kiln
