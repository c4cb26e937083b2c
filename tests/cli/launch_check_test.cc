// `kiln targets --check`'s launch checks (cli/launch_check.h), without a GPU and without compiles:
// every configuration that a built-in template's constraints admit launches at every shape the
// evaluator runs it at -- threads, shared memory and grid within the device's limits, and every
// tensor map encodable or knowingly left for the fallback -- so the search never proposes a
// configuration that can only fail. And a broken spec is reported per shape, with the reason.
#include "cli/launch_check.h"

#include <gtest/gtest.h>

#include "cli/sweep.h"
#include "tests/support/test_env.h"

namespace kiln::cli {
namespace {

std::vector<TargetSpec> built_in_targets() {
  Result<std::vector<TargetSpec>> targets = load_targets(testing::builtin_targets_dir());
  EXPECT_TRUE(targets.is_ok()) << targets.status().to_string();
  return targets.is_ok() ? std::move(targets).value() : std::vector<TargetSpec>{};
}

TEST(LaunchCheck, EveryConfigurationOfEveryBuiltInTemplateLaunchesAtEveryShape) {
  std::vector<TargetSpec> targets = built_in_targets();
  ASSERT_GE(targets.size(), 9u);
  size_t checked = 0;
  for (const TargetSpec& t : targets) {
    for (const auto& [backend, b] : t.backends) {
      EXPECT_TRUE(launch_problems(t, backend, b, b.seed, b.seed.defines).empty())
          << t.name << " " << backend << " seed";
      if (!b.tunable) continue;
      const auto configs =
          template_configs(*b.tunable, t.benchmark_for(backend), b.dtypes.front(), 0, 1);
      EXPECT_FALSE(configs.empty()) << t.name << " " << backend;
      for (const auto& params : configs) {
        const std::vector<LaunchProblem> p = launch_problems(t, backend, b, *b.tunable, params);
        ++checked;
        if (!p.empty()) {
          ADD_FAILURE() << t.name << " " << backend << " " << format_params(params) << " at "
                        << shape_string(p[0].shape) << " " << dtype_name(p[0].dtype) << ": "
                        << p[0].why << " (and " << p.size() - 1 << " more shapes)";
        }
      }
    }
  }
  // matmul alone has over 600 configurations.
  EXPECT_GT(checked, 600u);
}

TEST(LaunchCheck, ABrokenSpecIsReportedAtEveryShapeWithTheReason) {
  std::vector<TargetSpec> targets = built_in_targets();
  TargetSpec* matmul = nullptr;
  for (auto& t : targets) {
    if (t.name == "matmul") matmul = &t;
  }
  ASSERT_NE(matmul, nullptr);
  BackendSpec& cuda = matmul->backends.at("cuda");
  ASSERT_TRUE(cuda.tunable.has_value());
  const auto configs =
      template_configs(*cuda.tunable, matmul->benchmark_for("cuda"), cuda.dtypes.front(), 0, 1);
  ASSERT_FALSE(configs.empty());
  const size_t shapes = 1 + matmul->smoke.size() + matmul->sweep.size() + matmul->edge.size();

  KernelSpec too_big = *cuda.tunable;
  too_big.shared_bytes = "232448 + 1";
  std::vector<LaunchProblem> p = launch_problems(*matmul, "cuda", cuda, too_big, configs[0]);
  ASSERT_EQ(p.size(), shapes);
  EXPECT_EQ(p[0].why, "232449 bytes of shared memory");
  EXPECT_EQ(shape_string(p[0].shape), shape_string(matmul->benchmark_for("cuda")));

  KernelSpec wide = *cuda.tunable;
  wide.block[0] = "2048";
  p = launch_problems(*matmul, "cuda", cuda, wide, configs[0]);
  ASSERT_EQ(p.size(), shapes);
  EXPECT_NE(p[0].why.find("block 2048"), std::string::npos) << p[0].why;

  // A TMA configuration whose A box is taller than a map allows (256 rows).
  std::map<std::string, std::string> tma;
  for (const auto& c : configs) {
    if (c.at("TMA") == "1" && c.at("CL") == "0") tma = c;
  }
  ASSERT_FALSE(tma.empty());
  KernelSpec tall = *cuda.tunable;
  ASSERT_FALSE(tall.tensor_maps.empty());
  tall.tensor_maps[0].box[0] = "512";
  p = launch_problems(*matmul, "cuda", cuda, tall, tma);
  ASSERT_FALSE(p.empty());
  EXPECT_NE(p[0].why.find(tall.tensor_maps[0].name), std::string::npos) << p[0].why;
}

}  // namespace
}  // namespace kiln::cli
