// The cheating-kernel regression suite on the triton backend (docs/threats.md; ctest label gpu):
// every kernel under tests/cheats/triton/ is a modified rmsnorm Triton seed that cheats one way (or
// hangs, or faults), compiled by the Triton compile worker and evaluated end to end on GPU 0; the
// evaluator must reach the expected outcome at the expected stage, as for the cuda kernels.
// honest.py is the control that must verify. The classes that need state kept across launches
// (replays, memos, warm-up counters, bimodal work) have no case: a Triton kernel has no global
// variables, and its scratch pointers are passed as null. Without a GPU the evaluations skip; the
// compile check of the sources runs wherever Triton is.
#include <gtest/gtest.h>

#ifdef KILN_HAVE_CUDA

#include <set>
#include <string>

#include "evaluator/evaluation_wire.h"
#include "evaluator/triton/python_scan.h"
#include "evaluator/triton/triton_compiler.h"
#include "shared/target_spec.h"
#include "tests/support/cheat_cases.h"
#include "tests/support/gpu_cheat_suite.h"

namespace kiln::eval {
namespace {

using proto::Outcome;
using testing::CheatCase;

const CheatCase kTritonCheats[] = {
    {"honest", "honest.py", DType::kF16, Outcome::kVerified, ""},
    {"writes_nothing", "writes_nothing.py", DType::kF16, Outcome::kWrongAnswer, "smoke",
     "unwritten"},
    {"writes_even_rows_only", "writes_partial.py", DType::kF16, Outcome::kWrongAnswer, "smoke",
     "unwritten"},
    {"mutates_input", "mutates_input.py", DType::kF16, Outcome::kRejected, "smoke",
     "input 'x' was modified"},
    {"unit_rms", "unit_rms.py", DType::kF16, Outcome::kWrongAnswer, "smoke"},
    {"drops_eps", "drops_eps.py", DType::kF16, Outcome::kWrongAnswer, "adversarial"},
    {"half_precision", "half_precision.py", DType::kF32, Outcome::kWrongAnswer, "smoke"},
    {"fixed_n256", "fixed_n256.py", DType::kF16, Outcome::kWrongAnswer, "sweep"},
    {"no_tail", "no_tail.py", DType::kF16, Outcome::kWrongAnswer, "adversarial", "unwritten"},
    {"infinite_loop", "infinite_loop.py", DType::kF16, Outcome::kTimeout, "smoke"},
    {"illegal_address", "illegal_address.py", DType::kF16, Outcome::kCrash, "smoke"},
    {"writes_past_end", "writes_past_end.py", DType::kF16, Outcome::kRejected, "smoke",
     "after the end of 'y', the nearest 0 byte(s) past its end"},
    {"precision_drop", "precision_drop.py", DType::kF32, Outcome::kWrongAnswer, "precision",
     "precision below the seed's"},
    {"unsafe_off_shape", "unsafe_off_shape.py", DType::kF16, Outcome::kWrongAnswer, "adversarial"},
    {"reads_stale_output", "reads_stale_output.py", DType::kF16, Outcome::kWrongAnswer,
     "determinism", "differ bitwise"},
    {"honest_below_absurd_floor", "honest.py", DType::kF16, Outcome::kRejected, "floor",
     "below the physical floor", 1e3},
    {"honest_above_plausible_floor", "honest.py", DType::kF16, Outcome::kVerified, "", "", 5e12},
    // The scans: of the Python before anything is imported, and of Triton's PTX.
    {"scan_imports_os", "scan_imports_os.py", DType::kF16, Outcome::kRejected, "scan", "import:os"},
    {"scan_exec", "scan_exec.py", DType::kF16, Outcome::kRejected, "scan", "exec"},
    {"scan_ptx_globaltimer", "scan_ptx_globaltimer.py", DType::kF16, Outcome::kRejected, "compile",
     "ptx:%globaltimer"},
};

std::string cheat_path(const char* file) {
  return testing::source_root() + "/tests/cheats/triton/" + file;
}

struct TritonBackend {
  static constexpr const char* kName = "triton";
  static constexpr bool kToolchainOptional = true;  // Triton is an optional install
};
class TritonCheats : public testing::GpuCheatSuite<TritonBackend> {};

TEST_P(TritonCheats, IsCaughtAtItsStage) { expect_caught(GetParam(), cheat_path(GetParam().file)); }

INSTANTIATE_TEST_SUITE_P(Threats, TritonCheats, ::testing::ValuesIn(kTritonCheats),
                         testing::cheat_case_name);

// Needs Triton, not a GPU: a cheat that the scan passes must fail for its cheating, never for a
// typo, so every such source compiles in the dtype its case runs with (the PTX cheat is refused
// by the PTX scan, which needs its compile to succeed first). One dtype per file: each compile is
// two Triton compiles, about two seconds.
TEST(TritonCheatSources, EveryCheatPastTheScanCompilesInItsCasesDtype) {
  auto compiler = TritonCompiler::create();
  if (!compiler.is_ok()) GTEST_SKIP() << "no Triton: " << compiler.status().to_string();
  Result<TargetSpec> target = testing::load_builtin_target("rmsnorm");
  ASSERT_TRUE(target.is_ok()) << target.status().to_string();
  const BackendSpec& triton = *target->backend("triton");
  int compiled = 0;
  std::set<std::pair<std::string, DType>> done;
  for (const CheatCase& c : kTritonCheats) {
    if (!done.insert({c.file, c.dtype}).second) continue;
    const std::string source = testing::read_text(cheat_path(c.file));
    ASSERT_FALSE(source.empty()) << "cannot read " << cheat_path(c.file);
    if (!scan_python(source).empty()) {
      EXPECT_EQ(std::string(c.failing_stage), "scan") << c.file << " is refused by the scan";
      continue;
    }
    for (DType d : {c.dtype}) {
      CompileRequest request;
      request.source = source;
      request.kernel_name = "rmsnorm_seed";
      request.defines = triton.seed.defines;
      request.arch = "sm_90a";
      request.signature = evaluation_internal::signature(*target, d);
      CompileOutput out = (*compiler)->compile(request);
      if (std::string(c.failing_stage) == "compile") {
        EXPECT_TRUE(out.rejected) << c.file << " (" << dtype_name(d) << "):\n" << out.log;
      } else {
        EXPECT_TRUE(out.ok) << c.file << " (" << dtype_name(d) << "):\n" << out.log;
      }
      ++compiled;
    }
  }
  EXPECT_GT(compiled, 0);
}

}  // namespace
}  // namespace kiln::eval

#else  // !KILN_HAVE_CUDA

TEST(TritonCheats, NeedCudaHeaders) { GTEST_SKIP() << "no CUDA GPU: built without CUDA headers"; }

#endif  // KILN_HAVE_CUDA
