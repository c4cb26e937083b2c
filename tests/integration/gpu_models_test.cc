// Populations per GPU model end to end: a `kiln coordinator --gpu-models auto` on the cpu backend
// and two `kiln evaluator` processes that announce different models (`--gpu-model`), each with
// the hello the real daemon sends. Each model gets its own population and best, and no task of one
// model is evaluated by the evaluator of the other.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/support/test_env.h"

namespace kiln {
namespace {

using testing::read_json;

TEST(GpuModels, EachAnnouncedModelGetsItsOwnPopulationBestAndEvaluator) {
  testing::TempDir dir;
  const std::string out = dir.path() + "/coord";
  const std::string output =
      testing::run_two_model_farm(dir, "--targets reduce --budget 240s --patience 6 --in-flight 2");
  ASSERT_NE(output.find("rc=0"), std::string::npos) << output;

  // Two populations of reduce, one per model, each searched to its end.
  nlohmann::json summary = read_json(out + "/summary.json");
  ASSERT_TRUE(summary.is_array()) << output;
  std::map<std::string, nlohmann::json> by_model;
  for (const auto& t : summary) by_model[t["gpu_model"].get<std::string>()] = t;
  ASSERT_EQ(by_model.size(), 2u) << summary.dump(1);
  ASSERT_TRUE(by_model.count("Model Alpha") && by_model.count("beta")) << summary.dump(1);
  for (const auto& [model, t] : by_model) {
    EXPECT_GT(t["evaluations"].get<int>(), 1) << t.dump();
    EXPECT_GT(t["best_us"].get<double>(), 0) << t.dump();
    EXPECT_NE(t["state"].get<std::string>().find("converged"), std::string::npos) << t.dump();
  }

  // Two bests, each verified by its own model's evaluator.
  const std::map<std::string, std::string> unit_of = {{"Model Alpha", "reduce@Model_Alpha"},
                                                      {"beta", "reduce@beta"}};
  const std::map<std::string, std::string> evaluator_of = {{"Model Alpha", "eval-alpha"},
                                                           {"beta", "eval-beta"}};
  for (const auto& [model, unit] : unit_of) {
    nlohmann::json best = read_json(out + "/best/" + unit + ".json");
    ASSERT_TRUE(best.is_object()) << unit << "\n" << output;
    EXPECT_EQ(best["verification"]["outcome"], "verified") << best.dump();
    EXPECT_EQ(best["verification"]["evaluator_gpu_model"], model) << best.dump();
    EXPECT_EQ(best["verification"]["unit"], unit) << best.dump();
  }

  // Every result: the population its task was for is that of the model its evaluator announced.
  std::map<std::string, int> per_unit;
  std::ifstream lines(out + "/results.jsonl");
  std::string line;
  while (std::getline(lines, line)) {
    nlohmann::json r = nlohmann::json::parse(line, nullptr, false);
    ASSERT_FALSE(r.is_discarded()) << line;
    if (r["evaluator"] == "") continue;  // one the coordinator wrote itself (a quarantine)
    const std::string model = r["evaluator_gpu_model"].get<std::string>();
    ASSERT_TRUE(unit_of.count(model)) << line;
    EXPECT_EQ(r["unit"], unit_of.at(model)) << "a task for one model went to the other:\n" << line;
    EXPECT_EQ(r["evaluator"], evaluator_of.at(model)) << line;
    ++per_unit[r["unit"].get<std::string>()];
  }
  EXPECT_EQ(per_unit.size(), 2u);
  for (const auto& [model, t] : by_model) {
    EXPECT_EQ(per_unit[unit_of.at(model)], t["evaluations"].get<int>()) << t.dump();
  }
}

}  // namespace
}  // namespace kiln
