// The cheating-kernel regression suite on the cuda backend (docs/threats.md; ctest label gpu):
// every kernel under tests/cheats/cuda/ is a modified rmsnorm seed that cheats one way (or hangs,
// or faults), evaluated end to end on GPU 0; the evaluator must reach the expected outcome at the
// expected stage. honest.cu is the control that must verify. Without a GPU the evaluations skip
// with "no CUDA GPU"; the NVRTC compile check of the sources runs wherever libnvrtc loads.
#include <gtest/gtest.h>

#ifdef KILN_HAVE_CUDA

#include <string>

#include "evaluator/cuda/cuda_probe.h"
#include "evaluator/cuda/nvrtc_compiler.h"
#include "evaluator/prelude.h"
#include "evaluator/source_scan.h"
#include "tests/support/cheat_cases.h"
#include "tests/support/gpu_cheat_suite.h"

namespace kiln::eval {
namespace {

using proto::Outcome;
using testing::CheatCase;

// Timing dtype f16 throughout, except where the cheat is about f32. Row 6 (another stream) has no
// case: the sandbox owns stream creation and candidates are device code only. Rows 13 and 14 are
// properties of the timer and of acceptance, not of a kernel.
const CheatCase kCudaCheats[] = {
    {"honest", "honest.cu", DType::kF16, Outcome::kVerified, ""},
    {"writes_nothing", "writes_nothing.cu", DType::kF16, Outcome::kWrongAnswer, "smoke",
     "unwritten"},
    {"writes_even_rows_only", "writes_partial.cu", DType::kF16, Outcome::kWrongAnswer, "smoke",
     "unwritten"},
    {"mutates_input", "mutates_input.cu", DType::kF16, Outcome::kRejected, "smoke",
     "input 'x' was modified"},
    {"replay_by_pointer", "replay_by_pointer.cu", DType::kF16, Outcome::kWrongAnswer,
     "adversarial"},
    {"replay_in_timing", "replay_in_timing.cu", DType::kF16, Outcome::kWrongAnswer,
     "timed_outputs"},
    // Caught by the closing launch of each timing group: its inputs carry one element changed,
    // contents no earlier launch had, so an answer cached under a sample of the inputs is stale.
    {"replay_by_content", "replay_by_content.cu", DType::kF16, Outcome::kWrongAnswer,
     "timed_outputs"},
    {"unit_rms", "unit_rms.cu", DType::kF16, Outcome::kWrongAnswer, "smoke"},
    {"drops_eps", "drops_eps.cu", DType::kF16, Outcome::kWrongAnswer, "adversarial"},
    {"launches_child_kernel", "launches_child_kernel.cu", DType::kF16, Outcome::kRejected, "scan",
     "host-code:<<<"},
    {"calls_cublas", "calls_cublas.cu", DType::kF16, Outcome::kRejected, "scan",
     "identifier:cublasHgemm"},
    {"device_malloc", "device_malloc.cu", DType::kF16, Outcome::kRejected, "scan",
     "identifier:cudaMalloc"},
    {"reads_globaltimer", "reads_globaltimer.cu", DType::kF16, Outcome::kRejected, "scan",
     "timer:globaltimer"},
    {"warmup_counter", "warmup_counter.cu", DType::kF16, Outcome::kWrongAnswer, "sweep",
     "unwritten"},
    {"warmup_counter_late", "warmup_counter_late.cu", DType::kF16, Outcome::kWrongAnswer,
     "timed_outputs", "unwritten"},
    {"half_precision", "half_precision.cu", DType::kF32, Outcome::kWrongAnswer, "smoke"},
    {"reads_stale_output", "reads_stale_output.cu", DType::kF16, Outcome::kWrongAnswer,
     "determinism", "differ bitwise"},
    {"fixed_n256", "fixed_n256.cu", DType::kF16, Outcome::kWrongAnswer, "sweep"},
    // The edge shapes are also adversarial shapes now: caught there, first.
    {"no_tail", "no_tail.cu", DType::kF16, Outcome::kWrongAnswer, "adversarial", "unwritten"},
    {"infinite_loop", "infinite_loop.cu", DType::kF16, Outcome::kTimeout, "smoke"},
    {"illegal_address", "illegal_address.cu", DType::kF16, Outcome::kCrash, "smoke"},
    // Row 9 (faster than physics), with the honest kernel: a ceiling of 1 kB/s puts the floor of
    // 1 MB far above any real time; 5 TB/s (above any H100/H200's HBM) must not trip it.
    {"honest_below_absurd_floor", "honest.cu", DType::kF16, Outcome::kRejected, "floor",
     "below the physical floor", 1e3},
    {"honest_above_plausible_floor", "honest.cu", DType::kF16, Outcome::kVerified, "", "", 5e12},
    // Rows 15 and 20: per-row outputs remembered under a sample of input positions; launches
    // answered from the cache are stale where the secret sites moved.
    {"memo_sampled", "memo_sampled.cu", DType::kF16, Outcome::kWrongAnswer, "timed_outputs",
     "launch"},
    // Row 16: computes every other timed launch only.
    {"skips_alternate_launches", "skips_alternate_launches.cu", DType::kF16, Outcome::kWrongAnswer,
     "timed_outputs", "unwritten"},
    // Row 16, the timing side: always right, eight times the work on alternate launches.
    {"bimodal_work", "bimodal_work.cu", DType::kF16, Outcome::kRejected, "timing",
     "work differs between launches"},
    // Row 19: the scan reads what the compiler sees. A %globaltimer read split across two string
    // literals is caught by the text scan; names built by macros or token pasting only show in
    // the generated PTX, whose scan refuses the compile.
    {"scan_split_globaltimer", "scan_split_globaltimer.cu", DType::kF16, Outcome::kRejected, "scan",
     "timer:globaltimer"},
    {"scan_macro_globaltimer", "scan_macro_globaltimer.cu", DType::kF16, Outcome::kRejected,
     "compile", "ptx:%globaltimer"},
    {"scan_pasted_clock64", "scan_pasted_clock64.cu", DType::kF16, Outcome::kRejected, "compile",
     "ptx:%clock64"},
    {"scan_pasted_malloc", "scan_pasted_malloc.cu", DType::kF16, Outcome::kRejected, "compile",
     "ptx:"},
    // Row 10: an error tens of times the seed's, inside the f32 tolerance.
    {"precision_drop", "precision_drop.cu", DType::kF32, Outcome::kWrongAnswer, "precision",
     "precision below the seed's"},
    // Row 18: stores two elements past the end of its output.
    {"writes_past_end", "writes_past_end.cu", DType::kF16, Outcome::kRejected, "smoke",
     "after the end of 'y', the nearest 0 byte(s) past its end"},
    // Row 17: nondeterministic except at the largest sweep shape.
    {"nondeterministic_off_shape", "nondeterministic_off_shape.cu", DType::kF16,
     Outcome::kWrongAnswer, "determinism", "differ bitwise"},
    // Row 17: unsafe with large values except at the first sweep shape.
    {"unsafe_off_shape", "unsafe_off_shape.cu", DType::kF16, Outcome::kWrongAnswer, "adversarial"},
};

std::string cheat_path(const char* file) {
  return testing::source_root() + "/tests/cheats/cuda/" + file;
}

struct CudaBackend {
  static constexpr const char* kName = "cuda";
  static constexpr bool kToolchainOptional = false;  // NVRTC comes with the GPU's toolkit
};
class CudaCheats : public testing::GpuCheatSuite<CudaBackend> {};

TEST_P(CudaCheats, IsCaughtAtItsStage) { expect_caught(GetParam(), cheat_path(GetParam().file)); }

INSTANTIATE_TEST_SUITE_P(Threats, CudaCheats, ::testing::ValuesIn(kCudaCheats),
                         testing::cheat_case_name);

// Needs NVRTC, not a GPU: a cheat that the scan passes must fail for its cheating, never for a
// typo, so every such source compiles for every dtype of the target.
TEST(CudaCheatSources, EveryCheatPastTheScanCompilesWithNvrtcForEachDtype) {
  auto compiler = cuda::NvrtcCompiler::load();
  if (!compiler.is_ok()) {
    GTEST_SKIP() << "libnvrtc cannot be loaded: " << compiler.status().to_string();
  }
  cuda::CudaProbe probe = cuda::probe_cuda();
  const std::string arch = probe.gpus.empty() ? "sm_90a" : probe.gpus.front().arch();
  int compiled = 0;
  for (const CheatCase& c : kCudaCheats) {
    const std::string source = testing::read_text(cheat_path(c.file));
    ASSERT_FALSE(source.empty()) << "cannot read " << cheat_path(c.file);
    if (!scan_source(source, "cuda").empty()) continue;
    for (DType d : {DType::kF16, DType::kBF16, DType::kF32}) {
      CompileRequest request;
      request.source = with_prelude("cuda", source);
      request.kernel_name = "rmsnorm_seed";
      request.defines["KILN_DTYPE"] = dtype_macro("cuda", d).value();
      request.arch = arch;
      CompileOutput out = (*compiler)->compile(request);
      if (std::string(c.failing_stage) == "compile") {
        // Refused by the scan of the generated PTX: `rejected` is set only by a scan finding, so
        // the source itself compiles.
        EXPECT_TRUE(out.rejected) << c.file << " (" << dtype_name(d) << ", " << arch << "):\n"
                                  << out.log;
      } else {
        EXPECT_TRUE(out.ok) << c.file << " (" << dtype_name(d) << ", " << arch << "):\n" << out.log;
      }
      ++compiled;
    }
  }
  EXPECT_GT(compiled, 0);
}

}  // namespace
}  // namespace kiln::eval

#else  // !KILN_HAVE_CUDA

TEST(CudaCheats, NeedCudaHeaders) { GTEST_SKIP() << "no CUDA GPU: built without CUDA headers"; }

#endif  // KILN_HAVE_CUDA
