// The LLM proposer in a whole run on the cpu backend: `kiln coordinator`, `kiln evaluator` and
// `kiln agent --llm CONFIG` as processes, the model played by a scripted fake provider in this
// test process (tests/support/fake_llm_server.h).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/support/fake_llm_server.h"
#include "tests/support/test_env.h"

namespace kiln {
namespace {

using testing::read_json;

// reduce with a cpu template of ten configurations (as the KilnCoordinator test), so that
// verified parents exist and the coordinator asks the agent for their children.
std::string reduce_targets(const testing::TempDir& dir) {
  const std::string targets = dir.path() + "/targets";
  std::filesystem::create_directories(targets);
  std::filesystem::copy(testing::builtin_targets_dir() + "/reduce", targets + "/reduce");
  nlohmann::json spec = read_json(targets + "/reduce/target.json");
  spec["backends"]["cpu"]["template"]["params"]["UNROLL"] = {1, 2, 3, 4, 5, 6, 7, 8, 12, 16};
  std::ofstream(targets + "/reduce/target.json") << spec.dump(2);
  return targets;
}

// Runs coordinator + evaluator + LLM agent until the coordinator finishes; returns the output.
std::string run_farm(const testing::TempDir& dir, const std::string& targets, const std::string& llm_config,
                     const std::string& out) {
  const std::string kiln = testing::kiln_binary();
  const std::string script =
      "set -u\n" + kiln + " coordinator --bind 'tcp://127.0.0.1:*' --backend cpu --targets reduce" +
      " --budget 240s --patience 8 --in-flight 2 --out " + out + " --targets-dir " + targets + " > " +
      dir.path() + "/coord.log 2>&1 & coord=$!; " +
      "for i in $(seq 1 300); do [ -s " + out + "/endpoint ] && break; sleep 0.1; done; " +
      kiln + " agent --connect $(cat " + out + "/endpoint) --llm " + llm_config + " --stats " + dir.path() +
      "/llm-stats.json --targets-dir " + targets + " > " + dir.path() + "/agent.log 2>&1 & ag=$!; " +
      kiln + " evaluator --connect $(cat " + out + "/endpoint) --backend cpu --cache-dir " + dir.path() +
      "/cache --targets-dir " + targets + " > " + dir.path() + "/eval.log 2>&1 & ev=$!; " +
      "wait $coord; echo rc=$?; kill $ev $ag; wait $ev; wait $ag; echo agent_rc=$?; cat " + dir.path() +
      "/coord.log " + dir.path() + "/agent.log";
  std::string output;
  testing::run_command("bash " + dir.write("farm.sh", script) + " 2>&1", &output);
  return output;
}

TEST(KilnLlmAgent, RunFinishesOnTheBuiltinProposerWhenTheModelNeverAnswers) {
  testing::FakeLlmServer server([](const testing::FakeHttpRequest&) { return testing::FakeHttpResponse::never(); });
  ASSERT_TRUE(server.started());
  testing::TempDir dir;
  const std::string targets = reduce_targets(dir);
  nlohmann::json config = {{"models", {{{"name", "silent"}, {"endpoint", server.url() + "/v1"}, {"model", "m"}}}},
                           {"task_deadline_s", 2}, {"call_deadline_s", 2}, {"retries", 0}};
  const std::string cfg = dir.write("llm.json", config.dump());
  const std::string out = dir.path() + "/coord";
  const std::string output = run_farm(dir, targets, cfg, out);
  ASSERT_NE(output.find("rc=0"), std::string::npos) << output;
  nlohmann::json summary = read_json(out + "/summary.json");
  ASSERT_TRUE(summary.is_array() && summary.size() == 1) << output;
  EXPECT_NE(summary[0]["state"].get<std::string>().find("converged"), std::string::npos) << summary.dump();
  EXPECT_GT(summary[0]["evaluations"].get<int>(), 1) << summary.dump();
  // The agent was asked, every ask failed at its deadline, and the search went on in-process.
  nlohmann::json agents = read_json(out + "/agents.json");
  ASSERT_TRUE(agents.is_object()) << output;
  EXPECT_GT(agents["asked"].get<int>(), 0) << agents.dump() << "\n" << output;
  EXPECT_GT(agents["failed"].get<int>(), 0) << agents.dump() << "\n" << output;
  EXPECT_EQ(agents["children"].get<int>(), 0) << agents.dump();
  EXPECT_GT(server.request_count(), 0u);
  nlohmann::json stats = read_json(dir.path() + "/llm-stats.json");
  ASSERT_TRUE(stats.is_object()) << output;
  EXPECT_GT(stats["models"][0]["call_errors"].get<int>(), 0) << stats.dump();
  EXPECT_NE(output.find("agent_rc=0"), std::string::npos) << output;
}

// reduce whose cpu template keeps two to three accumulators (PAD only multiplies the space), so a
// kernel with sixteen independent accumulators is clearly faster than any parent.
std::string slow_template_targets(const testing::TempDir& dir) {
  const std::string targets = reduce_targets(dir);
  nlohmann::json spec = read_json(targets + "/reduce/target.json");
  spec["backends"]["cpu"]["template"]["params"] = {{"UNROLL", {2, 3}}, {"PAD", {0, 1, 2, 3, 4}}};
  std::ofstream(targets + "/reduce/target.json") << spec.dump(2);
  return targets;
}

const char* kSixteenAccumulators = R"(#include <cstdint>
extern "C" void reduce(const T* x, T* y, int64_t M, int64_t N) {
  for (int64_t r = 0; r < M; ++r) {
    const T* xr = x + r * N;
    float acc[16] = {};
    int64_t c = 0;
    for (; c + 16 <= N; c += 16) {
      for (int k = 0; k < 16; ++k) acc[k] += float(xr[c + k]);
    }
    float s = 0.f;
    for (int k = 0; k < 16; ++k) s += acc[k];
    for (; c < N; ++c) s += float(xr[c]);
    y[r] = T(s);
  }
}
)";

// The model writes `first` and, asked to repair a child whose log names `repair_marker`, the
// sixteen-accumulator kernel; both with parameters the template accepts.
testing::FakeLlmServer scripted_model(std::string first, std::string repair_marker = "") {
  return testing::FakeLlmServer([first, repair_marker](const testing::FakeHttpRequest& req) {
    const bool repair = !repair_marker.empty() && req.body.find("## Repair") != std::string::npos &&
                        req.body.find(repair_marker) != std::string::npos;
    const std::string source = repair ? std::string(kSixteenAccumulators) : first;
    return testing::FakeHttpResponse::json(
        200, testing::openai_reply(testing::kernel_reply(source, "{\"UNROLL\": 2, \"PAD\": 0}")));
  });
}

std::string scripted_config(const testing::TempDir& dir, const testing::FakeLlmServer& server) {
  nlohmann::json config = {{"models", {{{"name", "scripted"}, {"endpoint", server.url() + "/v1"}, {"model", "m"}}}}};
  return dir.write("llm.json", config.dump());
}

// The run's best for reduce is the model's kernel (no template configuration has 16 accumulators).
// On failure it shows what the run did: every result (operator, outcome, time) and the agent's
// counters, so that a miss says whether the model was never asked, or asked and beaten.
void expect_best_is_the_models_kernel(const std::string& out, const std::string& output) {
  nlohmann::json best = read_json(out + "/best/reduce.json");
  ASSERT_TRUE(best.is_object()) << output;
  std::string story;
  std::ifstream results(out + "/results.jsonl");
  for (std::string line; std::getline(results, line);) {
    nlohmann::json r = nlohmann::json::parse(line, nullptr, false);
    if (r.is_object()) story += r.value("task_id", "?") + " " + r.value("outcome", "?") + " " +
                                std::to_string(r["timing"].value("median_us", 0.0)) + " us\n";
  }
  std::ifstream agents(out + "/agents.json");
  story += "agents: " + std::string(std::istreambuf_iterator<char>(agents), {}) + "\n";
  EXPECT_NE(best["source"].get<std::string>().find("acc[16]"), std::string::npos)
      << best.dump() << "\nresults:\n" << story << output;
  EXPECT_EQ(best["verification"]["outcome"], "verified") << best.dump();
}

TEST(KilnLlmAgent, AScriptedModelsFasterKernelIsEvaluatedAndKept) {
  testing::FakeLlmServer server = scripted_model(kSixteenAccumulators);
  ASSERT_TRUE(server.started());
  testing::TempDir dir;
  const std::string targets = slow_template_targets(dir);
  const std::string out = dir.path() + "/coord";
  const std::string output = run_farm(dir, targets, scripted_config(dir, server), out);
  ASSERT_NE(output.find("rc=0"), std::string::npos) << output;
  nlohmann::json agents = read_json(out + "/agents.json");
  EXPECT_GT(agents["children"].get<int>(), 0) << agents.dump() << "\n" << output;
  expect_best_is_the_models_kernel(out, output);
}

TEST(KilnLlmAgent, ABrokenKernelIsRepairedFromItsLogAndKept) {
  std::string broken = kSixteenAccumulators;
  broken.replace(broken.find("float s = 0.f;"), 14, "float s = undeclared_name;");
  testing::FakeLlmServer server = scripted_model(broken, "undeclared_name");
  ASSERT_TRUE(server.started());
  testing::TempDir dir;
  const std::string targets = slow_template_targets(dir);
  const std::string out = dir.path() + "/coord";
  const std::string output = run_farm(dir, targets, scripted_config(dir, server), out);
  ASSERT_NE(output.find("rc=0"), std::string::npos) << output;
  nlohmann::json stats = read_json(dir.path() + "/llm-stats.json");
  EXPECT_GE(stats["models"][0]["repairs"].get<int>(), 1) << stats.dump() << "\n" << output;
  expect_best_is_the_models_kernel(out, output);
}

// `kiln run --llm CONFIG` starts the agent itself, beside the in-process built-in proposer: the
// model's kernel wins, and the agent's log and statistics land in the output folder.
TEST(KilnLlmAgent, KilnRunWithLlmStartsTheAgentAndKeepsTheModelsFasterKernel) {
  testing::FakeLlmServer server = scripted_model(kSixteenAccumulators);
  ASSERT_TRUE(server.started());
  testing::TempDir dir;
  const std::string targets = slow_template_targets(dir);
  const std::string out = dir.path() + "/run";
  std::string output;
  const int rc = testing::run_command(
      testing::kiln_binary() + " run --targets reduce --backend cpu --budget 240s --patience 8 --llm " +
          scripted_config(dir, server) + " --out " + out + " --cache-dir " + dir.path() + "/cache --targets-dir " +
          targets + " 2>&1",
      &output);
  ASSERT_EQ(rc, 0) << output;
  EXPECT_NE(output.find("LLM agent started"), std::string::npos) << output;
  expect_best_is_the_models_kernel(out, output);
  nlohmann::json agents = read_json(out + "/agents.json");
  ASSERT_TRUE(agents.is_object()) << output;
  EXPECT_GT(agents["children"].get<int>(), 0) << agents.dump();
  EXPECT_GT(server.request_count(), 0u);
  // The agent wrote its statistics on the way out (kiln run stops it with SIGTERM).
  nlohmann::json stats = read_json(out + "/llm-stats.json");
  ASSERT_TRUE(stats.is_object()) << output;
  EXPECT_GT(stats["models"][0]["calls"].get<int>(), 0) << stats.dump();
  EXPECT_TRUE(std::filesystem::exists(out + "/agent-llm.log"));
  // What the coordinator counted from the proposals (the agent reports its use with each answer):
  // the model's calls and tokens, and its kernel among the kept children.
  nlohmann::json usage = read_json(out + "/llm-usage.json");
  ASSERT_TRUE(usage.is_object()) << output;
  ASSERT_EQ(usage["models"].size(), 1u) << usage.dump();
  const nlohmann::json& m = usage["models"][0];
  EXPECT_EQ(m["model"], "scripted");
  EXPECT_GT(m["calls"].get<int>(), 0) << usage.dump();
  EXPECT_LE(m["calls"].get<int>(), stats["models"][0]["calls"].get<int>())
      << usage.dump() << stats.dump();
  EXPECT_GT(m["input_tokens"].get<int>(), 0) << usage.dump();
  EXPECT_GT(m["output_tokens"].get<int>(), 0) << usage.dump();
  EXPECT_GE(m["accepted"].get<int>(), 1) << usage.dump();
  // And the report says so: the LLM table names the model with those numbers.
  std::string md;
  ASSERT_EQ(
      testing::run_command(testing::kiln_binary() + " report " + out + " --format md 2>&1", &md), 0)
      << md;
  EXPECT_NE(md.find("scripted"), std::string::npos) << md;
  EXPECT_NE(md.find("| " + std::to_string(m["calls"].get<int>()) + " |"), std::string::npos) << md;
}

}  // namespace
}  // namespace kiln
