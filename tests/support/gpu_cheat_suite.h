// The GPU half of the cheating-kernel regression suite, shared by its backends
// (tests/gpu/cuda_cheats_test.cc, tests/gpu/triton_cheats_test.cc): a fixture that loads the
// rmsnorm target and the backend's toolchain once per suite, and the end-to-end evaluation of one
// cheat kernel on GPU 0 checked against its case (tests/support/cheat_cases.h).
#pragma once
#ifdef KILN_HAVE_CUDA

#include <gtest/gtest.h>

#include <string>
#include <utility>

#include "evaluator/cuda/cuda_probe.h"
#include "evaluator/evaluation.h"
#include "evaluator/toolchain.h"
#include "shared/target_spec.h"
#include "tests/support/cheat_cases.h"
#include "tests/support/test_env.h"

namespace kiln::testing {

// Backend: a struct with `static constexpr const char* kName` ("cuda", "triton") and
// `static constexpr bool kToolchainOptional`: whether a GPU without the backend's toolchain skips
// the suite (Triton is an optional install) or fails it (NVRTC comes with the GPU's toolkit).
template <class Backend>
class GpuCheatSuite : public ::testing::TestWithParam<CheatCase> {
 protected:
  static void SetUpTestSuite() {
    cuda::CudaProbe probe = cuda::probe_cuda();
    if (!probe.driver_loaded || probe.gpus.empty()) {
      skip_ = !probe.driver_error.empty() ? probe.driver_error : "no devices";
      return;
    }
    dir_ = new TempDir();
    Result<TargetSpec> target = load_builtin_target("rmsnorm");
    if (!target.is_ok()) {
      setup_error_ = target.status().to_string();
      return;
    }
    target_ = new TargetSpec(std::move(target).value());
    auto toolchain = eval::Toolchain::create(Backend::kName, dir_->path());
    if (!toolchain.is_ok()) {
      (Backend::kToolchainOptional ? skip_ : setup_error_) =
          std::string("a GPU but no ") + Backend::kName +
          " toolchain: " + toolchain.status().to_string();
      return;
    }
    toolchain_ = std::move(toolchain).value().release();
  }
  static void TearDownTestSuite() {
    delete toolchain_;
    delete target_;
    delete dir_;
    toolchain_ = nullptr;
    target_ = nullptr;
    dir_ = nullptr;
  }
  void SetUp() override {
    if (!skip_.empty()) GTEST_SKIP() << "no CUDA GPU: " << skip_;
    ASSERT_TRUE(setup_error_.empty()) << setup_error_;
  }

  // Evaluates the cheat kernel of case `c` (the file at `path`, entry point rmsnorm_seed,
  // launched with the seed's geometry and defines) through every stage and the timing, at a
  // small benchmark shape and with a short hang timeout, and checks the verdict.
  void expect_caught(const CheatCase& c, const std::string& path) {
    eval::CandidateSpec candidate;
    candidate.label = c.file;
    candidate.source = read_text(path);
    ASSERT_FALSE(candidate.source.empty()) << "cannot read " << path;
    const BackendSpec* backend = target_->backend(Backend::kName);
    ASSERT_NE(backend, nullptr);
    candidate.geometry = &backend->seed;
    candidate.kernel_name = "rmsnorm_seed";
    candidate.params = backend->seed.defines;

    eval::EvaluatorOptions options;
    options.kiln_binary = kiln_binary();
    options.cache_dir = dir_->path();
    options.gpu = 0;
    options.phase_timeout_ms = 3000;  // the hang case ends quickly
    options.benchmark_override = Shape{{"M", 256}, {"N", 1024}};
    options.min_samples = 10;
    options.max_timing_ms = 200;
    options.time = true;
    options.bandwidth_bytes_per_s = c.bandwidth_bytes_per_s;
    auto evaluator = eval::CandidateEvaluator::create(*target_, Backend::kName,
                                                      toolchain_->compiler(), options);
    ASSERT_TRUE(evaluator.is_ok()) << evaluator.status().to_string();
    expect_caught_as_described(c, (*evaluator)->evaluate(candidate, c.dtype));
  }

  static inline TempDir* dir_ = nullptr;
  static inline TargetSpec* target_ = nullptr;
  static inline eval::Toolchain* toolchain_ = nullptr;
  static inline std::string skip_;
  static inline std::string setup_error_;
};

}  // namespace kiln::testing

#endif  // KILN_HAVE_CUDA
