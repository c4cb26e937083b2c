// Tests of CandidateEvaluator end to end on the cpu backend: the real sandbox child, compiler and
// reference, on the rmsnorm target at a small benchmark shape.
#include <gtest/gtest.h>

#include <string>

#include "evaluator/evaluation.h"
#include "evaluator/toolchain.h"
#include "tests/support/test_env.h"

namespace kiln::eval {
namespace {

// The rmsnorm cpu seed, except that at the benchmark shape (64 x 256) it replays the first result
// it computed into each output pointer (THREATS.md row 3). Other shapes take the honest path, so
// only the re-check of the timed outputs can catch it.
constexpr const char* kPointerReplaySource = R"(#include <cmath>
#include <cstdint>

static const T* outs[8];
static T results[8][64 * 256];
static int seen = 0;

extern "C" void rmsnorm_seed(const T* x, const T* w, T* y, int64_t M, int64_t N, float eps) {
  const bool benchmark = M == 64 && N == 256;
  for (int k = 0; benchmark && k < seen; ++k) {
    if (outs[k] != y) continue;
    for (int64_t i = 0; i < M * N; ++i) y[i] = results[k][i];
    return;
  }
  for (int64_t r = 0; r < M; ++r) {
    float ss = 0.f;
    for (int64_t c = 0; c < N; ++c) ss += float(x[r * N + c]) * float(x[r * N + c]);
    const float inv = 1.f / std::sqrt(ss / float(N) + eps);
    for (int64_t c = 0; c < N; ++c) y[r * N + c] = T(float(x[r * N + c]) * inv * float(w[c]));
  }
  if (!benchmark || seen == 8) return;
  outs[seen] = y;
  for (int64_t i = 0; i < M * N; ++i) results[seen][i] = y[i];
  ++seen;
}
)";

// Evaluates `source` as the rmsnorm cpu seed's kernel, f32, at a 64 x 256 benchmark shape, with
// a fresh cache (compiled reference and binaries) under `dir`.
proto::EvaluationResult evaluate_rmsnorm(const std::string& source, const testing::TempDir& dir) {
  proto::EvaluationResult failed;
  Result<TargetSpec> target = load_target(KILN_SOURCE_DIR "/targets/rmsnorm");
  if (!target.is_ok()) {
    failed.log = target.status().to_string();
    return failed;
  }
  auto toolchain = Toolchain::create("cpu", dir.path());
  if (!toolchain.is_ok()) {
    failed.log = toolchain.status().to_string();
    return failed;
  }
  EvaluatorOptions options;
  options.kiln_binary = testing::kiln_binary();
  options.cache_dir = dir.path();
  options.benchmark_override = Shape{{"M", 64}, {"N", 256}};
  options.min_samples = 10;
  options.max_timing_ms = 200;
  auto evaluator = CandidateEvaluator::create(*target, "cpu", (*toolchain)->compiler(), options);
  if (!evaluator.is_ok()) {
    failed.log = evaluator.status().to_string();
    return failed;
  }
  const KernelSpec& seed = target->backend("cpu")->seed;
  CandidateSpec candidate;
  candidate.label = "test";
  candidate.source = source.empty() ? seed.source : source;
  candidate.kernel_name = seed.kernel_name;
  candidate.params = seed.defines;
  candidate.geometry = &seed;
  return (*evaluator)->evaluate(candidate, DType::kF32);
}

std::string stages(const proto::EvaluationResult& r) {
  std::string text;
  for (const auto& s : r.stages) {
    text += s.name + (s.passed ? " passed" : " FAILED: " + s.detail) + "\n";
  }
  return text + "log: " + r.log;
}

TEST(CandidateEvaluator, VerifiesTheHonestCpuSeed) {
  testing::TempDir dir;
  proto::EvaluationResult r = evaluate_rmsnorm("", dir);  // "": the seed's own source
  EXPECT_EQ(r.outcome, proto::Outcome::kVerified) << stages(r);
  ASSERT_FALSE(r.stages.empty());
  for (const auto& s : r.stages) EXPECT_TRUE(s.passed) << s.name << ": " << s.detail;
  EXPECT_EQ(r.stages.back().name, "timed_outputs");
  EXPECT_GT(r.timing.samples, 0u);
}

TEST(CandidateEvaluator, RejectsAPointerKeyedReplayCheatInTimedOutputs) {
  testing::TempDir dir;
  proto::EvaluationResult r = evaluate_rmsnorm(kPointerReplaySource, dir);
  EXPECT_EQ(r.outcome, proto::Outcome::kWrongAnswer) << stages(r);
  ASSERT_FALSE(r.stages.empty());
  EXPECT_EQ(r.stages.back().name, "timed_outputs") << stages(r);
  EXPECT_FALSE(r.stages.back().passed) << stages(r);
  for (size_t i = 0; i + 1 < r.stages.size(); ++i) {
    EXPECT_TRUE(r.stages[i].passed) << r.stages[i].name << ": " << r.stages[i].detail;
  }
}

}  // namespace
}  // namespace kiln::eval
