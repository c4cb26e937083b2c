// The cheating-kernel regression suite on the cpu backend (docs/threats.md): every kernel under
// tests/cheats/cpu/ is a modified rmsnorm seed that cheats one way, evaluated end to end (scan,
// compile, sandbox, verification stages, timing, floor); the evaluator must reach the expected
// outcome at the expected stage. honest.cpp is the control that must verify.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "evaluator/evaluation.h"
#include "evaluator/toolchain.h"
#include "shared/target_spec.h"
#include "tests/support/cheat_cases.h"
#include "tests/support/test_env.h"

namespace kiln::eval {
namespace {

using proto::Outcome;
using testing::CheatCase;

// Rows 13 and 14 (timing false positives, a lucky sample) are properties of the timer and of
// acceptance, not of a kernel; they have no cheat here.
const CheatCase kCpuCheats[] = {
    {"honest", "honest.cpp", DType::kF32, Outcome::kVerified, ""},
    {"writes_nothing", "writes_nothing.cpp", DType::kF32, Outcome::kWrongAnswer, "smoke",
     "unwritten"},
    {"writes_even_rows_only", "writes_partial.cpp", DType::kF32, Outcome::kWrongAnswer, "smoke",
     "unwritten"},
    {"mutates_input", "mutates_input.cpp", DType::kF32, Outcome::kRejected, "smoke",
     "input 'x' was modified"},
    {"replay_by_pointer", "replay_by_pointer.cpp", DType::kF32, Outcome::kWrongAnswer,
     "adversarial"},
    {"replay_in_timing", "replay_in_timing.cpp", DType::kF32, Outcome::kWrongAnswer,
     "timed_outputs"},
    // Caught by the closing launch of each timing group: its inputs carry one element changed,
    // contents no earlier launch had, so an answer cached under a sample of the inputs is stale.
    {"replay_by_content", "replay_by_content.cpp", DType::kF32, Outcome::kWrongAnswer,
     "timed_outputs"},
    {"unit_rms", "unit_rms.cpp", DType::kF32, Outcome::kWrongAnswer, "smoke"},
    {"drops_eps", "drops_eps.cpp", DType::kF32, Outcome::kWrongAnswer, "adversarial"},
    {"calls_system", "calls_system.cpp", DType::kF32, Outcome::kRejected, "scan",
     "identifier:system"},
    {"loads_library", "loads_library.cpp", DType::kF32, Outcome::kRejected, "scan",
     "identifier:dlopen"},
    {"spawns_thread", "spawns_thread.cpp", DType::kF32, Outcome::kRejected, "scan",
     "identifier:std::thread"},
    // Declares thrd_create by hand, past the scan: refused after compiling, because the shared
    // object imports a function outside the math/memory allow-list.
    {"c11_thread", "c11_thread.cpp", DType::kF32, Outcome::kRejected, "compile", "refused"},
    {"load_time_hook", "load_time_hook.cpp", DType::kF32, Outcome::kRejected, "scan",
     "identifier:constructor"},
    {"warmup_counter", "warmup_counter.cpp", DType::kF32, Outcome::kWrongAnswer, "sweep",
     "unwritten"},
    {"warmup_counter_late", "warmup_counter_late.cpp", DType::kF32, Outcome::kWrongAnswer,
     "timed_outputs", "unwritten"},
    {"half_precision", "half_precision.cpp", DType::kF32, Outcome::kWrongAnswer, "smoke"},
    {"reads_stale_output", "reads_stale_output.cpp", DType::kF32, Outcome::kWrongAnswer,
     "determinism", "differ bitwise"},
    {"fixed_n256", "fixed_n256.cpp", DType::kF32, Outcome::kWrongAnswer, "sweep"},
    // The edge shapes are also adversarial shapes now: caught there, first.
    {"no_tail", "no_tail.cpp", DType::kF32, Outcome::kWrongAnswer, "adversarial", "unwritten"},
    // Row 9 (faster than physics), with the honest kernel: a ceiling of 1 kB/s puts the floor of
    // 132 kB far above any real time; 100 GB/s (more than a cpu reaches) must not trip it.
    {"honest_below_absurd_floor", "honest.cpp", DType::kF32, Outcome::kRejected, "floor",
     "below the physical floor", 1e3},
    {"honest_above_plausible_floor", "honest.cpp", DType::kF32, Outcome::kVerified, "", "", 1e11},
    // Row 15: remembers outputs by inputs compared in full. Every launch has inputs no earlier
    // launch had, so it never hits and stays right (CpuCheatTiming checks it gains nothing).
    {"memo_full_compare", "memo_full_compare.cpp", DType::kF32, Outcome::kVerified, ""},
    // Rows 15 and 20: remembers outputs keyed on a sample of positions; the launches it answers
    // from the cache are stale where the sites moved.
    {"memo_sampled", "memo_sampled.cpp", DType::kF32, Outcome::kWrongAnswer, "timed_outputs",
     "launch"},
    // Row 16: computes every other timed launch only.
    {"skips_alternate_launches", "skips_alternate_launches.cpp", DType::kF32, Outcome::kWrongAnswer,
     "timed_outputs", "unwritten"},
    // Row 16, the timing side: always right, sixteen times the work on alternate launches. Which
    // of the two refusals it gets depends on where the median falls (in the slow mode the spread
    // already passes the noise limit); both name the cause.
    {"bimodal_work", "bimodal_work.cpp", DType::kF32, Outcome::kRejected, "timing",
     "work differs between launches"},
    // Row 19: the scan reads what the compiler sees. Names glued by glibc's __CONCAT or by ##
    // only show in the preprocessed source, whose scan refuses the compile; a ## in the text is
    // refused by the text scan itself.
    {"scan_concat_system", "scan_concat_system.cpp", DType::kF32, Outcome::kRejected, "compile",
     "identifier:system"},
    {"scan_concat_constructor", "scan_concat_constructor.cpp", DType::kF32, Outcome::kRejected,
     "compile", "identifier:constructor"},
    {"scan_concat_rdtsc", "scan_concat_rdtsc.cpp", DType::kF32, Outcome::kRejected, "compile",
     "refused -- kiln: scan of the preprocessed source"},
    {"scan_token_paste", "scan_token_paste.cpp", DType::kF32, Outcome::kRejected, "scan",
     "token-paste:##"},
    // Row 10: an error tens of times the seed's, inside the tolerance.
    {"precision_drop", "precision_drop.cpp", DType::kF32, Outcome::kWrongAnswer, "precision",
     "precision below the seed's"},
    // Row 18: stores two elements past the end of its output.
    {"writes_past_end", "writes_past_end.cpp", DType::kF32, Outcome::kRejected, "smoke",
     "after the end of 'y', the nearest 0 byte(s) past its end"},
    // Row 17: nondeterministic except at the largest sweep shape.
    {"nondeterministic_off_shape", "nondeterministic_off_shape.cpp", DType::kF32,
     Outcome::kWrongAnswer, "determinism", "differ bitwise"},
    // Row 17: unsafe with large values except at the first sweep shape.
    {"unsafe_off_shape", "unsafe_off_shape.cpp", DType::kF32, Outcome::kWrongAnswer, "adversarial"},
    // Row 20 on cross_entropy, where one logit moved by a few units changes a loss by less than
    // the tolerance: the sites move far past the row's largest logit.
    {"ce_memo_sampled", "ce_memo_sampled.cpp", DType::kF32, Outcome::kWrongAnswer, "timed_outputs",
     "launch", 0, "cross_entropy"},
};

class CpuCheats : public ::testing::TestWithParam<CheatCase> {
 protected:
  static void SetUpTestSuite() {
    dir_ = new testing::TempDir();
    for (const char* name : {"rmsnorm", "cross_entropy"}) {
      Result<TargetSpec> target = testing::load_builtin_target(name);
      if (!target.is_ok()) {
        setup_error_ = target.status().to_string();
        return;
      }
      targets_[name] = TargetSpec(std::move(target).value());
    }
    auto toolchain = Toolchain::create("cpu", dir_->path());
    if (!toolchain.is_ok()) {
      setup_error_ = toolchain.status().to_string();
      return;
    }
    toolchain_ = std::move(toolchain).value().release();
  }
  static void TearDownTestSuite() {
    delete toolchain_;
    delete dir_;
    toolchain_ = nullptr;
    dir_ = nullptr;
    targets_.clear();
  }
  void SetUp() override { ASSERT_TRUE(setup_error_.empty()) << setup_error_; }

  static inline testing::TempDir* dir_ = nullptr;
  static inline std::map<std::string, TargetSpec> targets_;
  static inline Toolchain* toolchain_ = nullptr;
  static inline std::string setup_error_;

  // Evaluates tests/cheats/cpu/<file> as a seed of `target` (at a small benchmark shape for
  // rmsnorm, the target's cpu benchmark otherwise).
  static proto::EvaluationResult evaluate(const char* file, const std::string& target, DType dtype,
                                          double bandwidth_bytes_per_s) {
    const std::string path = testing::source_root() + "/tests/cheats/cpu/" + file;
    const TargetSpec& spec = targets_.at(target);
    CandidateSpec candidate;
    candidate.label = file;
    candidate.source = testing::read_text(path);
    EXPECT_FALSE(candidate.source.empty()) << "cannot read " << path;
    const BackendSpec* cpu = spec.backend("cpu");
    EXPECT_NE(cpu, nullptr);
    if (cpu == nullptr) return {};
    candidate.geometry = &cpu->seed;
    candidate.kernel_name = cpu->seed.kernel_name;
    EvaluatorOptions options;
    options.kiln_binary = testing::kiln_binary();
    options.cache_dir = dir_->path();
    if (target == "rmsnorm") options.benchmark_override = Shape{{"M", 64}, {"N", 256}};
    // A timing is 100 samples however loaded the machine is (a CI host sharing its cores): the
    // launches a cheat counts (warmup_counter_late turns after its 64th call, noisy_first_timing
    // calms after its 60th) fall where the test expects, and a bimodal set has samples enough.
    options.min_samples = 100;
    options.max_samples = 100;
    options.max_timing_ms = 60000;
    options.time = true;
    options.bandwidth_bytes_per_s = bandwidth_bytes_per_s;
    auto evaluator = CandidateEvaluator::create(spec, "cpu", toolchain_->compiler(), options);
    EXPECT_TRUE(evaluator.is_ok()) << evaluator.status().to_string();
    if (!evaluator.is_ok()) return {};
    return (*evaluator)->evaluate(candidate, dtype);
  }
};

TEST_P(CpuCheats, IsCaughtAtItsStage) {
  const CheatCase& c = GetParam();
  proto::EvaluationResult r = evaluate(c.file, c.target, c.dtype, c.bandwidth_bytes_per_s);
  testing::expect_caught_as_described(c, r);
}

// Row 15: a replayed answer is hundreds of times faster than the work (315x was seen on this
// backend). The full-compare memo must not be much faster than the honest kernel: a coarse
// bound (half), far from both the replay and the noise.
using CpuCheatTiming = CpuCheats;
TEST_F(CpuCheatTiming, FullCompareMemoGetsNoCacheHits) {
  proto::EvaluationResult honest = evaluate("honest.cpp", "rmsnorm", DType::kF32, 0);
  proto::EvaluationResult memo = evaluate("memo_full_compare.cpp", "rmsnorm", DType::kF32, 0);
  ASSERT_EQ(honest.outcome, Outcome::kVerified) << testing::describe(honest);
  ASSERT_EQ(memo.outcome, Outcome::kVerified) << testing::describe(memo);
  EXPECT_GT(memo.timing.median_us, 0.5 * honest.timing.median_us)
      << "honest " << honest.timing.median_us << " us, memo " << memo.timing.median_us << " us";
}

// Row 16 against a busy machine: a timing with no single time is taken again with fresh sites,
// and the last one is judged. The control is bimodal through its first timing only and verifies
// on its second; the cheat is bimodal on all of them and is refused with that said.
TEST_F(CpuCheatTiming, ABimodalFirstTimingIsTakenAgainAndOnlyAPersistentOneIsRefused) {
  proto::EvaluationResult settles = evaluate("noisy_first_timing.cpp", "rmsnorm", DType::kF32, 0);
  ASSERT_EQ(settles.outcome, Outcome::kVerified) << testing::describe(settles);
  EXPECT_EQ(settles.metrics.at("timing_attempts"), 2) << testing::describe(settles);
  ASSERT_FALSE(settles.stages.empty());
  EXPECT_EQ(settles.stages.back().name, "timing");
  EXPECT_NE(settles.stages.back().detail.find("timing 2 of 3, the first refused: "),
            std::string::npos)
      << settles.stages.back().detail;

  proto::EvaluationResult cheat = evaluate("bimodal_work.cpp", "rmsnorm", DType::kF32, 0);
  ASSERT_EQ(cheat.outcome, Outcome::kRejected) << testing::describe(cheat);
  EXPECT_EQ(cheat.metrics.at("timing_attempts"), 3);
  EXPECT_NE(cheat.log.find("in each of 3 timings"), std::string::npos) << cheat.log;
}

// Another process that writes 64 MiB over and over for 20 ms, then sleeps 20 ms, until the
// object goes: the memory traffic of a compile or a second program on a shared box, which slows
// a memory-bound kernel's launches in runs.
class MemoryStreamer {
 public:
  MemoryStreamer() {
    std::vector<unsigned char> buffer(size_t{64} << 20);  // allocated before fork: the child
    pid_ = fork();                                        // calls nothing that takes a lock
    if (pid_ != 0) return;
    prctl(PR_SET_PDEATHSIG, SIGKILL);  // gone with the test, however it ends
    if (getppid() == 1) _exit(0);
    for (unsigned char byte = 0;; ++byte) {
      timespec start{}, now{};
      clock_gettime(CLOCK_MONOTONIC, &start);
      do {
        std::memset(buffer.data(), byte, buffer.size());
        clock_gettime(CLOCK_MONOTONIC, &now);
      } while ((now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000 < 20);
      const timespec pause{0, 20 * 1000 * 1000};
      nanosleep(&pause, nullptr);
    }
  }
  ~MemoryStreamer() {
    if (pid_ <= 0) return;
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  MemoryStreamer(const MemoryStreamer&) = delete;
  MemoryStreamer& operator=(const MemoryStreamer&) = delete;
  bool running() const { return pid_ > 0; }

 private:
  pid_t pid_ = -1;
};

// Samples taken while another process loads the machine are set aside only where the machine
// probe saw it busy (docs/threats.md row 16): the honest kernel verifies beside a process that
// streams memory, and the cheat that does sixteen times the work on every other launch is still
// refused in each of its timings.
TEST_F(CpuCheatTiming, AnotherProcessStreamingMemoryNeitherRefusesTheHonestNorPassesTheCheat) {
  MemoryStreamer streamer;
  ASSERT_TRUE(streamer.running()) << std::strerror(errno);
  proto::EvaluationResult honest = evaluate("honest.cpp", "rmsnorm", DType::kF32, 0);
  EXPECT_EQ(honest.outcome, Outcome::kVerified) << testing::describe(honest);
  proto::EvaluationResult cheat = evaluate("bimodal_work.cpp", "rmsnorm", DType::kF32, 0);
  ASSERT_EQ(cheat.outcome, Outcome::kRejected) << testing::describe(cheat);
  EXPECT_NE(cheat.log.find("work differs between launches"), std::string::npos) << cheat.log;
  EXPECT_NE(cheat.log.find("in each of 3 timings"), std::string::npos) << cheat.log;
}

INSTANTIATE_TEST_SUITE_P(Threats, CpuCheats, ::testing::ValuesIn(kCpuCheats),
                         testing::cheat_case_name);

}  // namespace
}  // namespace kiln::eval
