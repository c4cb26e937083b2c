// A built-in target with the cpu toolchain, for evaluator tests that run its cpu seed through real
// evaluations (sandbox, compiles, timing) with options of their own.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <utility>

#include "evaluator/evaluation.h"
#include "evaluator/toolchain.h"
#include "tests/support/test_env.h"

namespace kiln::eval {

class CpuSeedFixture : public ::testing::Test {
 protected:
  // Loads the built-in target `name` and the cpu toolchain (cache in dir_); call as
  // ASSERT_NO_FATAL_FAILURE(load("rmsnorm")).
  void load(const std::string& name) {
    auto t = testing::load_builtin_target(name);
    ASSERT_TRUE(t.is_ok()) << t.status().to_string();
    target_ = std::move(t).value();
    auto toolchain = Toolchain::create("cpu", dir_.path());
    ASSERT_TRUE(toolchain.is_ok()) << toolchain.status().to_string();
    toolchain_ = std::move(toolchain).value();
  }
  // An evaluator of the target on cpu with `options` (the kiln binary and the cache filled in);
  // null, failing the test, when it cannot be created.
  std::unique_ptr<CandidateEvaluator> make_evaluator(EvaluatorOptions options) {
    options.kiln_binary = testing::kiln_binary();
    options.cache_dir = dir_.path();
    auto e = CandidateEvaluator::create(target_, "cpu", toolchain_->compiler(), options);
    EXPECT_TRUE(e.is_ok()) << e.status().to_string();
    return e.is_ok() ? std::move(e).value() : nullptr;
  }
  // The target's cpu seed as a candidate.
  CandidateSpec cpu_seed() const {
    const KernelSpec& seed = target_.backend("cpu")->seed;
    CandidateSpec c;
    c.label = "seed";
    c.source = seed.source;
    c.kernel_name = seed.kernel_name;
    c.params = seed.defines;
    c.geometry = &seed;
    return c;
  }

  testing::TempDir dir_;
  TargetSpec target_;
  std::unique_ptr<Toolchain> toolchain_;
};

}  // namespace kiln::eval
