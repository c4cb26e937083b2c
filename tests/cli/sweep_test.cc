#include "cli/sweep.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>

#include "tests/support/fault_farm.h"
#include "tests/support/test_env.h"

namespace kiln::cli {
namespace {

TEST(Sweep, EnumeratesEveryConfigurationThatMeetsTheConstraints) {
  // A space of its own (the built-in templates change as they are tuned).
  KernelSpec spec;
  spec.space = {{"BLOCK", {64, 128, 256, 512}}, {"VEC", {1, 2, 4, 8}}, {"ROWS", {1, 2, 4}}};
  spec.constraints = {"VEC * S <= 16", "ROWS * 32 <= BLOCK"};
  const Shape shape = {{"M", 16384}, {"N", 4096}};
  auto f16 = template_configs(spec, shape, DType::kF16, 0, 1);
  auto f32 = template_configs(spec, shape, DType::kF32, 0, 1);
  // BLOCK(4) x VEC(4) x ROWS(3) = 48; "VEC * S <= 16" drops VEC=8 for f32; "ROWS*32 <= BLOCK"
  // drops ROWS=4 at BLOCK=64.
  EXPECT_EQ(f16.size(), 4u * 4u * 3u - 4u);
  EXPECT_EQ(f32.size(), 4u * 3u * 3u - 3u);
  std::set<std::map<std::string, std::string>> unique(f16.begin(), f16.end());
  EXPECT_EQ(unique.size(), f16.size());
  for (const auto& c : f32) {
    EXPECT_NE(c.at("VEC"), "8");
    EXPECT_LE(std::stoi(c.at("ROWS")) * 32, std::stoi(c.at("BLOCK")));
  }
}

TEST(Sweep, LimitTakesASeededSampleOfTheSpace) {
  Result<TargetSpec> t = testing::load_builtin_target("reduce");
  ASSERT_TRUE(t.is_ok());
  const KernelSpec& spec = *t->backend("cuda")->tunable;
  auto a = template_configs(spec, t->benchmark, DType::kF16, 5, 7);
  auto b = template_configs(spec, t->benchmark, DType::kF16, 5, 7);
  auto c = template_configs(spec, t->benchmark, DType::kF16, 5, 8);
  EXPECT_EQ(a.size(), 5u);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
}

TEST(Sweep, KilnEvalSweepVerifiesAndRanksCpuConfigurations) {
  testing::TempDir cache;
  std::string out;
  int rc = testing::run_command(testing::kiln_binary() +
                                    " eval reduce --backend cpu --sweep --shape M=64,N=512"
                                    " --cache-dir " + cache.path(), &out);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("3 of 3 configurations verified"), std::string::npos) << out;
  EXPECT_NE(out.find("evaluations per hour"), std::string::npos) << out;
}

// A sweep stopped by SIGTERM (`timeout`, a scheduler's limit) or Ctrl-C: the configuration in
// progress finishes and the JSON of every configuration evaluated so far still comes out.
TEST(Sweep, ASignalStopsTheSweepAndKeepsWhatWasEvaluated) {
  testing::TempDir dir;
  const std::string targets = dir.file("targets");
  ASSERT_EQ(testing::copy_padded_target(targets, "reduce", 200), "");
  const std::string script = dir.write(
      "stop.sh",
      testing::kiln_binary() + " eval reduce --backend cpu --sweep --json --targets-dir " +
          targets + " --cache-dir " + dir.file("cache") + " > " + dir.file("out.json") + " 2> " +
          dir.file("err.log") + " &\np=$!\nfor i in $(seq 1 600); do grep -q '\\[3/' " +
          dir.file("err.log") + " && break; sleep 0.1; done\nkill -TERM $p\nwait $p\necho rc=$?\n");
  std::string out;
  ASSERT_EQ(testing::run_command("bash " + script, &out), 0) << out;
  const std::string log = testing::read_file(dir.file("err.log"));
  EXPECT_NE(out.find("rc=0"), std::string::npos) << out << log;
  EXPECT_NE(log.find("stopped by a signal after"), std::string::npos) << log;
  nlohmann::json j =
      nlohmann::json::parse(testing::read_file(dir.file("out.json")), nullptr, false);
  ASSERT_TRUE(j.is_object()) << testing::read_file(dir.file("out.json")) << log;
  EXPECT_TRUE(j["interrupted"].get<bool>());
  EXPECT_EQ(j["planned"], 600);  // UNROLL (3) x PAD (200)
  const size_t done = j["results"].size();
  EXPECT_GE(done, 3u);
  EXPECT_LT(done, 600u);
  EXPECT_EQ(j["configurations"], done);
  for (const auto& r : j["results"]) {
    EXPECT_EQ(r["outcome"], "verified") << r.dump();
    EXPECT_TRUE(r["params"].contains("PAD")) << r.dump();
  }
}

}  // namespace
}  // namespace kiln::cli
