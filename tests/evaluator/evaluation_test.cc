// Tests of CandidateEvaluator end to end on the cpu backend: the real sandbox child, compiler and
// reference, on the rmsnorm target at a small benchmark shape.
#include <gtest/gtest.h>

#include <fstream>
#include <optional>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "evaluator/evaluation.h"
#include "evaluator/toolchain.h"
#include "tests/support/test_env.h"

namespace kiln::eval {
namespace {

// The rmsnorm cpu seed, except that at the benchmark shape (64 x 256) it replays the first result
// it computed into each output pointer (docs/threats.md row 3). Other shapes take the honest path,
// so only the re-check of the timed outputs can catch it.
constexpr const char* kPointerReplaySource = R"(#include <cmath>
#include <cstdint>

static const T* outs[8];
static T results[8][256 * 4096];
static int seen = 0;

extern "C" void rmsnorm_seed(const T* x, const T* w, T* y, int64_t M, int64_t N, float eps) {
  const bool benchmark = M == 256 && N == 4096;
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

// Evaluates `source` ("": the seed's own) as the cpu seed's kernel of the target in `target_dir`,
// f32, with a short timing phase (at `benchmark` when given) and a fresh cache under `cache_dir`.
proto::EvaluationResult evaluate_cpu(const std::string& target_dir, const std::string& source,
                                     const std::string& cache_dir, std::optional<Shape> benchmark = {}) {
  proto::EvaluationResult failed;
  Result<TargetSpec> target = load_target(target_dir);
  if (!target.is_ok()) {
    failed.log = target.status().to_string();
    return failed;
  }
  auto toolchain = Toolchain::create("cpu", cache_dir);
  if (!toolchain.is_ok()) {
    failed.log = toolchain.status().to_string();
    return failed;
  }
  EvaluatorOptions options;
  options.kiln_binary = testing::kiln_binary();
  options.cache_dir = cache_dir;
  options.benchmark_override = benchmark;
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

// `source` as the rmsnorm cpu seed's kernel at a 256 x 4096 benchmark shape: a launch takes
// about a millisecond, long enough to time on a loaded machine (microsecond launches there gave
// samples too spread for a median).
proto::EvaluationResult evaluate_rmsnorm(const std::string& source, const testing::TempDir& dir) {
  return evaluate_cpu(testing::builtin_targets_dir() + "/rmsnorm", source, dir.path(),
                      Shape{{"M", 256}, {"N", 4096}});
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
  EXPECT_EQ(r.stages.back().name, "timing");
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

// A target with an index input and a scratch buffer: y[m] = 2 * x[m, labels[m]], staged through
// the scratch buffer. The index input must hold labels in [0, N) whatever the distribution (an
// out-of-range label would read outside x), and the scratch buffer must arrive zero-filled.
constexpr const char* kGatherSpec = R"({
  "name": "gather", "description": "y[m] = 2 * x[m, labels[m]]", "dims": ["M", "N"],
  "args": [
    {"name": "x", "role": "input", "dtype": "T", "shape": ["M", "N"]},
    {"name": "labels", "role": "input", "dtype": "i32", "shape": ["M"], "index_bound": "N"},
    {"name": "ws", "role": "scratch", "dtype": "f32", "shape": ["M"]},
    {"name": "y", "role": "output", "dtype": "f32", "shape": ["M"]}
  ],
  "dtypes": ["f32"], "tolerance": {"f32": {"rel": 0, "abs": 0, "rms": 0}},
  "shapes": {"benchmark": {"M": 262144, "N": 16}, "smoke": [{"M": 4, "N": 3}],
             "sweep": [{"M": 9, "N": 17}], "edge": [{"M": 1, "N": 1}]},
  "bytes": "M * 12", "flops": "M", "reference": "reference.cpp",
  "backends": {"cpu": {"dtypes": ["f32"], "seed": {"source": "seed.cpp", "kernel": "gather"}}}
})";

constexpr const char* kGatherReference = R"(#include <cstdint>
extern "C" void kiln_reference(const double* const* in, double* const* out, const int64_t* dims,
                               const double*) {
  for (int64_t m = 0; m < dims[0]; ++m) out[0][m] = 2 * in[0][m * dims[1] + int64_t(in[1][m])];
}
)";

// Fails (returns without writing y) unless every label is in range and the scratch is zeroed.
constexpr const char* kGatherSeed = R"(#include <cstdint>
extern "C" void gather(const T* x, const int32_t* labels, float* ws, float* y, int64_t M, int64_t N) {
  for (int64_t m = 0; m < M; ++m) {
    if (labels[m] < 0 || labels[m] >= N || ws[m] != 0.f) return;
  }
  for (int64_t m = 0; m < M; ++m) ws[m] = 2.f * float(x[m * N + labels[m]]);
  for (int64_t m = 0; m < M; ++m) y[m] = ws[m];
  for (int64_t m = 0; m < M; ++m) ws[m] = 0.f;  // left as found, for the next timed launch
}
)";

// The cpu seed of the target in `dir`/`name`.
proto::EvaluationResult evaluate_cpu_seed(const testing::TempDir& dir, const std::string& name) {
  return evaluate_cpu(dir.path() + "/" + name, "", dir.path() + "/cache");
}

// The benchmark shape makes a launch take a few hundred microseconds: at a few microseconds a
// busy 2-core machine's preemptions split the samples in two and the timing is refused as bimodal.
TEST(CandidateEvaluator, IndexInputsStayInBoundsAndScratchArrivesZeroed) {
  testing::TempDir dir;
  dir.write("gather/target.json", kGatherSpec);
  dir.write("gather/reference.cpp", kGatherReference);
  dir.write("gather/seed.cpp", kGatherSeed);
  proto::EvaluationResult r = evaluate_cpu_seed(dir, "gather");
  EXPECT_EQ(r.outcome, proto::Outcome::kVerified) << stages(r);
  EXPECT_GT(r.timing.samples, 0u);
}

// Row sums; the reference's full entry point is deliberately wrong at the benchmark shape
// (M = 300), its kiln_reference_rows right. The timed outputs are then verified only if kiln
// re-checks them on sampled rows through kiln_reference_rows; without it they fail.
constexpr const char* kRowSumSpec = R"({
  "name": "rowsum", "description": "y[m] = sum x[m, :]", "dims": ["M", "N"],
  "args": [{"name": "x", "role": "input", "dtype": "T", "shape": ["M", "N"]},
           {"name": "y", "role": "output", "dtype": "f32", "shape": ["M"]}],
  "dtypes": ["f32"], "tolerance": {"f32": {"rel": 1e-5, "abs": 1e-5, "rms": 1e-5}},
  "shapes": {"benchmark": {"M": 300, "N": 4096}, "smoke": [{"M": 4, "N": 3}], "sweep": [{"M": 9, "N": 17}]},
  "bytes": "M * N * 4", "flops": "M * N", "reference": "reference.cpp",
  "backends": {"cpu": {"dtypes": ["f32"], "seed": {"source": "seed.cpp", "kernel": "rowsum"}}}
})";

constexpr const char* kRowSumReference = R"(#include <cstdint>
static void row(const double* x, double* y, int64_t N, int64_t m) {
  y[m] = 0;
  for (int64_t c = 0; c < N; ++c) y[m] += x[m * N + c];
}
extern "C" void kiln_reference(const double* const* in, double* const* out, const int64_t* dims,
                               const double*) {
  for (int64_t m = 0; m < dims[0]; ++m) row(in[0], out[0], dims[1], m);
  if (dims[0] == 300) out[0][7] += 1000;  // wrong, where only the full reference is used
}
)";

constexpr const char* kRowSumRows = R"(
extern "C" void kiln_reference_rows(const double* const* in, double* const* out, const int64_t* dims,
                                    const double*, const int64_t* rows, int64_t n) {
  for (int64_t t = 0; t < n; ++t) row(in[0], out[0], dims[1], rows[t]);
}
)";

constexpr const char* kRowSumSeed = R"(#include <cstdint>
extern "C" void rowsum(const T* x, float* y, int64_t M, int64_t N) {
  for (int64_t m = 0; m < M; ++m) {
    float s = 0.f;
    for (int64_t c = 0; c < N; ++c) s += float(x[m * N + c]);
    y[m] = s;
  }
}
)";

TEST(CandidateEvaluator, AdversarialSkipLeavesOutTheNamedInputsAndSaysWhy) {
  testing::TempDir dir;
  for (const char* f : {"reference.cpp", "seed_cpu.cpp", "target.json"}) {
    std::ifstream in(testing::builtin_targets_dir() + "/rmsnorm/" + f);
    std::stringstream text;
    text << in.rdbuf();
    dir.write(std::string("rms/") + f, text.str());
  }
  nlohmann::json j = nlohmann::json::parse(std::ifstream(dir.file("rms/target.json")));
  j["backends"].erase("cuda");
  j["backends"].erase("triton");
  j["backends"]["cpu"].erase("template");
  j["backends"]["cpu"]["benchmark"] = {{"M", 256}, {"N", 4096}};
  j["adversarial_skip"] = {{"f32", {{"distributions", {"zeros", "special"}}, {"reason", "test"}}}};
  dir.write("rms/target.json", j.dump());
  proto::EvaluationResult r = evaluate_cpu_seed(dir, "rms");
  ASSERT_EQ(r.outcome, proto::Outcome::kVerified) << stages(r);
  bool seen = false;
  for (const auto& s : r.stages) {
    if (s.name != "adversarial") continue;
    seen = true;
    // Four distributions at the first sweep shape, then the two breaking ones left (large and
    // mixed scale) at the largest sweep shape and the 5 edge shapes.
    EXPECT_EQ(s.cases, 4u + 6u * 2u);
    EXPECT_NE(s.detail.find("inputs all_equal large_magnitude mixed_scale small_magnitude;"),
              std::string::npos) << s.detail;
    EXPECT_NE(s.detail.find("left out by the target: special zeros (test)"), std::string::npos) << s.detail;
  }
  EXPECT_TRUE(seen);
}

// A kernel right at ordinary values but wrong at large ones in a dtype that is not the timed one
// (it clamps f16 inputs to +-50): the adversarial stage checks every dtype, so it is caught there.
constexpr const char* kClampingRowSum = R"(#include <cstdint>
extern "C" void rowsum(const T* x, float* y, int64_t M, int64_t N) {
  for (int64_t m = 0; m < M; ++m) {
    float s = 0.f;
    for (int64_t c = 0; c < N; ++c) {
      float v = float(x[m * N + c]);
      if (sizeof(T) == 2) v = v > 50.f ? 50.f : (v < -50.f ? -50.f : v);
      s += v;
    }
    y[m] = s;
  }
}
)";

TEST(CandidateEvaluator, AdversarialStageChecksTheDtypesThatAreNotTimed) {
  testing::TempDir dir;
  nlohmann::json j = nlohmann::json::parse(kRowSumSpec);
  j["dtypes"] = {"f32", "f16"};
  j["tolerance"]["f16"] = {{"rel", 1e-2}, {"abs", 1e-2}, {"rms", 1e-3}};
  j["backends"]["cpu"]["dtypes"] = {"f32", "f16"};  // f32 first: the timed dtype
  j["shapes"]["benchmark"] = {{"M", 256}, {"N", 4096}};  // a launch of ~1 ms: timeable under load
  dir.write("rowsum/target.json", j.dump());
  dir.write("rowsum/reference.cpp", kRowSumReference);
  dir.write("rowsum/seed.cpp", kRowSumSeed);
  proto::EvaluationResult honest = evaluate_cpu_seed(dir, "rowsum");
  ASSERT_EQ(honest.outcome, proto::Outcome::kVerified) << stages(honest);
  for (const auto& st : honest.stages) {
    if (st.name == "adversarial") {
      EXPECT_EQ(st.cases, 9u);  // 6 distributions in f32, 3 in f16
      EXPECT_NE(st.detail.find("dtypes f16 f32"), std::string::npos) << st.detail;
    }
  }

  testing::TempDir bad;
  bad.write("rowsum/target.json", j.dump());
  bad.write("rowsum/reference.cpp", kRowSumReference);
  bad.write("rowsum/seed.cpp", kClampingRowSum);
  proto::EvaluationResult r = evaluate_cpu_seed(bad, "rowsum");
  EXPECT_EQ(r.outcome, proto::Outcome::kWrongAnswer) << stages(r);
  ASSERT_FALSE(r.stages.empty());
  EXPECT_EQ(r.stages.back().name, "adversarial") << stages(r);
  EXPECT_FALSE(r.stages.back().passed);
}

// The closing launches use sampled rows only where the full reference is expensive (over 1e10
// flops at the benchmark shape), so the spec claims that many.
std::string expensive_rowsum_spec() {
  nlohmann::json j = nlohmann::json::parse(kRowSumSpec);
  j["flops"] = "M * N * 1e9";
  return j.dump();
}

TEST(CandidateEvaluator, TimedOutputsUseTheRowReferenceWhenThereIsOne) {
  testing::TempDir dir;
  dir.write("rowsum/target.json", expensive_rowsum_spec());
  dir.write("rowsum/seed.cpp", kRowSumSeed);
  dir.write("rowsum/reference.cpp", std::string(kRowSumReference) + kRowSumRows);
  proto::EvaluationResult sampled = evaluate_cpu_seed(dir, "rowsum");
  EXPECT_EQ(sampled.outcome, proto::Outcome::kVerified) << stages(sampled);

  testing::TempDir full;
  full.write("rowsum/target.json", expensive_rowsum_spec());
  full.write("rowsum/seed.cpp", kRowSumSeed);
  full.write("rowsum/reference.cpp", kRowSumReference);
  proto::EvaluationResult all_rows = evaluate_cpu_seed(full, "rowsum");
  EXPECT_EQ(all_rows.outcome, proto::Outcome::kWrongAnswer) << stages(all_rows);
  ASSERT_FALSE(all_rows.stages.empty());
  EXPECT_EQ(all_rows.stages.back().name, "timed_outputs");
}

// A row sum off by OFF times the root of the row's summed squared terms: the size of an honest
// fp32 sum's rounding error, which a tolerance's terms term admits per row even where the row
// cancels to ~0 (docs/targets.md, "Choosing tolerances").
constexpr const char* kOffByTermsRowSum = R"(#include <cmath>
#include <cstdint>
extern "C" void rowsum(const T* x, float* y, int64_t M, int64_t N) {
  for (int64_t m = 0; m < M; ++m) {
    float s = 0.f;
    double squares = 0;
    for (int64_t c = 0; c < N; ++c) {
      s += float(x[m * N + c]);
      squares += double(x[m * N + c]) * double(x[m * N + c]);
    }
    y[m] = std::isfinite(s) ? float(s + OFF * std::sqrt(squares)) : s;
  }
}
)";

// Only the terms term admits anything (rel, abs and rms are 0). The edge shape of one long row is
// where large-magnitude inputs once cancelled below an RMS-scaled tolerance; the timed outputs are
// checked on sampled rows (the spec claims an expensive reference), whose norms come from the row
// reference on the squared inputs, with the sites' changed inputs squared again.
proto::EvaluationResult evaluate_off_by_terms(const std::string& off, double terms,
                                              const std::string& more_reference = "") {
  testing::TempDir dir;
  nlohmann::json j = nlohmann::json::parse(expensive_rowsum_spec());
  j["tolerance"]["f32"] = {{"rel", 0}, {"abs", 0}, {"rms", 0}, {"terms", terms}};
  j["shapes"]["edge"] = {{{"M", 1}, {"N", 4099}}, {{"M", 2}, {"N", 1}}};
  dir.write("rowsum/target.json", j.dump());
  dir.write("rowsum/reference.cpp", std::string(kRowSumReference) + kRowSumRows + more_reference);
  std::string seed = kOffByTermsRowSum;
  seed.replace(seed.find("OFF"), 3, off);
  dir.write("rowsum/seed.cpp", seed);
  return evaluate_cpu_seed(dir, "rowsum");
}

TEST(CandidateEvaluator, ATermsToleranceAdmitsEachRowTheErrorItsTermsAllowAndNoMore) {
  proto::EvaluationResult within = evaluate_off_by_terms("5e-4", 1e-3);
  EXPECT_EQ(within.outcome, proto::Outcome::kVerified) << stages(within);
  EXPECT_GT(within.timing.samples, 0u);

  proto::EvaluationResult outside = evaluate_off_by_terms("3e-3", 1e-3);
  EXPECT_EQ(outside.outcome, proto::Outcome::kWrongAnswer) << stages(outside);
  EXPECT_NE(outside.log.find("+ terms 0.001 * "), std::string::npos) << outside.log;

  proto::EvaluationResult no_terms = evaluate_off_by_terms("5e-4", 0);
  EXPECT_EQ(no_terms.outcome, proto::Outcome::kWrongAnswer) << stages(no_terms);
}

// A reference that exports kiln_reference_terms sets the sizes itself (here twice the root of
// the summed squares): a row sum off by 1.5e-3 of that root passes a terms tolerance of 1e-3 only
// through it, at every stage and on the timed outputs' sampled rows.
constexpr const char* kRowSumTerms = R"(
#include <cmath>
extern "C" void kiln_reference_terms(const double* const* in, double* const* out, const int64_t* dims,
                                     const double*, const int64_t* rows, int64_t n) {
  for (int64_t t = 0; t < n; ++t) {
    double squares = 0;
    for (int64_t c = 0; c < dims[1]; ++c) squares += in[0][rows[t] * dims[1] + c] * in[0][rows[t] * dims[1] + c];
    out[0][rows[t]] = 2 * std::sqrt(squares);
  }
}
)";

TEST(CandidateEvaluator, AReferenceThatExportsItsTermsSetsTheirSizes) {
  proto::EvaluationResult own = evaluate_off_by_terms("1.5e-3", 1e-3, kRowSumTerms);
  EXPECT_EQ(own.outcome, proto::Outcome::kVerified) << stages(own);
  EXPECT_GT(own.timing.samples, 0u);
  proto::EvaluationResult squares = evaluate_off_by_terms("1.5e-3", 1e-3);
  EXPECT_EQ(squares.outcome, proto::Outcome::kWrongAnswer) << stages(squares);
}

}  // namespace
}  // namespace kiln::eval
