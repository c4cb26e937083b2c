// for_each_config parses a template's constraints once and walks its space; it must admit exactly
// the configurations that satisfies_constraints (which parses per call) admits, in the same order,
// for every built-in template on each backend, at the benchmark shape. for_each_combination is
// checked against the size of the space. Every admitted configuration is checked against
// satisfies_constraints; of those it refuses, a spread sample of about 20000 per template is
// (matmul's space has 622080 combinations: checking each one parsed per call took three minutes).
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "evaluator/evaluation.h"
#include "shared/target_spec.h"
#include "tests/support/test_env.h"

namespace kiln::eval {
namespace {

using Config = std::map<std::string, std::string>;

// Walks every combination in for_each_combination's order and checks `walked` against
// satisfies_constraints: each walked configuration must satisfy it and come in that order; a
// combination not walked must not satisfy it (checked on every `stride`-th one).
void expect_same_as_per_call_checks(const KernelSpec& k, const Shape& shape, DType dtype,
                                    const std::vector<Config>& walked, size_t stride,
                                    const std::string& what) {
  std::set<Config> admitted(walked.begin(), walked.end());
  EXPECT_EQ(admitted.size(), walked.size()) << what << ": a configuration walked twice";
  std::vector<Config> in_order;
  size_t index = 0, refused_checked = 0;
  for_each_combination(k, [&](const Config& c) {
    const bool is_walked = admitted.count(c) > 0;
    if (is_walked || index % stride == 0) {
      Result<bool> ok = satisfies_constraints(k, shape, dtype, c);
      const bool satisfied = ok.is_ok() && *ok;
      EXPECT_EQ(satisfied, is_walked) << what << ": combination " << index;
      refused_checked += !is_walked;
    }
    if (is_walked) in_order.push_back(c);
    ++index;
    return true;
  });
  EXPECT_EQ(in_order, walked) << what << ": not walked in the space's order, or not in the space";
  if (walked.size() < index) {
    EXPECT_GT(refused_checked, 0u) << what << ": no refusal was checked";
  }
}

TEST(ConfigSpace, ForEachConfigAdmitsExactlyWhatEachConstraintCheckAdmitsForEveryBuiltInTemplate) {
  size_t templates = 0;
  for (const char* name : {"rmsnorm", "softmax", "reduce", "layernorm", "rotary_embedding", "cross_entropy",
                           "matmul", "flash_attention", "fused_mlp"}) {
    auto t = testing::load_builtin_target(name);
    ASSERT_TRUE(t.is_ok()) << t.status().to_string();
    for (const char* backend : {"cuda", "cpu", "triton"}) {
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
      EXPECT_FALSE(walked.empty()) << name << " " << backend;
      const size_t stride = std::max<size_t>(1, combinations / 20000);
      expect_same_as_per_call_checks(*b->tunable, shape, dtype, walked, stride,
                                     std::string(name) + " " + backend);
      ++templates;
    }
  }
  EXPECT_GE(templates, 10u);
}

}  // namespace
}  // namespace kiln::eval
