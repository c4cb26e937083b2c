// for_each_config parses a template's constraints once and walks its space; it must admit exactly
// the configurations that satisfies_constraints (which parses per call) admits, in the same order,
// for every built-in template on each backend, at the benchmark shape. for_each_combination is
// checked against the size of the space.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "evaluator/evaluation.h"
#include "shared/target_spec.h"

namespace kiln::eval {
namespace {

using Config = std::map<std::string, std::string>;

// Every combination of the space, kept when satisfies_constraints says so.
std::vector<Config> brute_force(const KernelSpec& k, const Shape& shape, DType dtype) {
  std::vector<Config> kept;
  for_each_combination(k, [&](const Config& c) {
    Result<bool> ok = satisfies_constraints(k, shape, dtype, c);
    if (ok.is_ok() && *ok) kept.push_back(c);
    return true;
  });
  return kept;
}

TEST(ConfigSpace, ForEachConfigAdmitsExactlyWhatEachConstraintCheckAdmitsForEveryBuiltInTemplate) {
  size_t templates = 0;
  for (const char* name : {"rmsnorm", "softmax", "reduce", "layernorm", "rotary_embedding", "cross_entropy",
                           "matmul", "flash_attention", "fused_mlp"}) {
    auto t = load_target(std::string(KILN_SOURCE_DIR) + "/targets/" + name);
    ASSERT_TRUE(t.is_ok()) << t.status().to_string();
    for (const char* backend : {"cuda", "cpu"}) {
      const BackendSpec* b = t->backend(backend);
      if (!b || !b->tunable) continue;
      const Shape shape = t->benchmark_for(backend);
      const DType dtype = b->dtypes.front();
      std::vector<Config> walked;
      for_each_config(*b->tunable, shape, dtype, [&](const Config& c) {
        walked.push_back(c);
        return true;
      });
      size_t combinations = 1, walked_all = 0;
      for (const auto& [param, values] : b->tunable->space) combinations *= values.size();
      for_each_combination(*b->tunable, [&](const Config&) { return ++walked_all > 0; });
      EXPECT_EQ(walked_all, combinations) << name << " " << backend;
      const std::vector<Config> expected = brute_force(*b->tunable, shape, dtype);
      EXPECT_FALSE(expected.empty()) << name << " " << backend;
      EXPECT_EQ(walked, expected) << name << " " << backend << ": " << walked.size() << " against "
                                  << expected.size();
      ++templates;
    }
  }
  EXPECT_GE(templates, 10u);
}

}  // namespace
}  // namespace kiln::eval
