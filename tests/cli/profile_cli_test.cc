// `kiln profile` as a user runs it: ranking recorded traces (--from-traces), its exit codes, and
// profiling a program on a machine without a GPU (nothing recorded, a clear message, the program's
// exit code forwarded).
#include <gtest/gtest.h>

#include <filesystem>

#include "cli/plan_sweep.h"
#include "evaluator/profile/plan.h"
#include "shared/target_spec.h"
#include "tests/support/cheat_cases.h"
#include "tests/support/test_env.h"

namespace kiln {
namespace {

using testing::kiln_binary;
using testing::run_command;

std::string step_dir() { return testing::source_root() + "/tests/data/profile_trace/step"; }

// Where `kiln profile` looks for its injection library by default.
std::string default_inject() {
  return (std::filesystem::path(kiln_binary()).parent_path() / ".." / "lib" / "libkiln_inject.so")
      .lexically_normal()
      .string();
}

TEST(ProfileCli, FromTracesPrintsTheRankingAndWritesThePlan) {
  testing::TempDir dir;
  const std::string plan = dir.file("plan.json");
  std::string out;
  ASSERT_EQ(run_command(kiln_binary() + " profile --from-traces " + step_dir() + " --top 4 --out " +
                            plan + " 2>&1",
                        &out),
            0)
      << out;
  EXPECT_NE(out.find("ampere_fp16_s16816gemm_fp16_128x128_ldg8_f2f_stages_32x5_tn"), std::string::npos) << out;
  EXPECT_NE(out.find("gain@2x"), std::string::npos) << out;
  EXPECT_NE(out.find("... 5 more kernels"), std::string::npos) << out;
  EXPECT_NE(out.find("flash_attention"), std::string::npos) << out;
  EXPECT_NE(out.find("(unmapped)"), std::string::npos) << out;
  EXPECT_NE(out.find("in 17 kernel launches (9 kernels, 3 processes)"), std::string::npos) << out;
  // The bad lines are reported with file:line, and ranking goes on.
  EXPECT_NE(out.find("kiln-trace-4242-1700000000000000000.jsonl:9:"), std::string::npos) << out;
  EXPECT_NE(out.find("plan written to " + plan), std::string::npos) << out;
  Result<profile::Plan> p = profile::load_plan(plan);
  ASSERT_TRUE(p.is_ok()) << p.status().to_string();
  EXPECT_EQ(p->total_gpu_ns, 40000u);
  EXPECT_TRUE(p->command.empty());
}

// A PyTorch step profiled under emit_nvtx(record_shapes=True) (tests/data/profile_trace/nvtx): the
// ranking says which shapes each target ran at, the plan holds them, and `kiln run --shapes` takes
// the plan as its sweep (only the run's targets; a plan with none of their shapes is refused with
// what to do).
TEST(ProfileCli, ShapesFromNvtxRangesGoIntoThePlanAndARunsSweep) {
  testing::TempDir dir;
  const std::string plan = dir.file("plan.json");
  std::string out;
  ASSERT_EQ(run_command(kiln_binary() + " profile --from-traces " + testing::source_root() +
                            "/tests/data/profile_trace/nvtx --out " + plan + " 2>&1",
                        &out),
            0)
      << out;
  EXPECT_NE(out.find("shapes recovered from NVTX ranges (6 of 7 kernel launches"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("K=14336,M=512,N=4096"), std::string::npos) << out;
  EXPECT_NE(out.find("kiln run --shapes"), std::string::npos) << out;

  Result<std::vector<TargetSpec>> targets = load_targets(testing::builtin_targets_dir());
  ASSERT_TRUE(targets.is_ok()) << targets.status().to_string();
  std::vector<TargetSpec> run;
  for (const TargetSpec& t : *targets) {
    if (t.name == "matmul" || t.name == "softmax") run.push_back(t);
  }
  std::string note;
  Result<coordinator::ShapeSweep> sweep = cli::load_sweep_or_plan(plan, run, &note);
  ASSERT_TRUE(sweep.is_ok()) << sweep.status().to_string();
  ASSERT_EQ(sweep->size(), 1u);  // rmsnorm is not in this run; softmax has no shapes
  const std::vector<Shape>& mm = sweep->at("matmul");
  ASSERT_EQ(mm.size(), 2u);
  EXPECT_EQ(mm[0], (Shape{{"M", 512}, {"N", 4096}, {"K", 14336}}));
  EXPECT_NE(note.find("matmul at 2 shape(s)"), std::string::npos) << note;

  // A sweep file still reads as one.
  const std::string file = dir.write("sweep.json", R"({"matmul": [{"M": 64, "N": 64, "K": 64}]})");
  sweep = cli::load_sweep_or_plan(file, run, &note);
  ASSERT_TRUE(sweep.is_ok()) << sweep.status().to_string();
  EXPECT_EQ(sweep->at("matmul").size(), 1u);

  // The step trace has no ranges: its plan names no shapes, and a run refuses it saying why.
  const std::string bare = dir.file("bare.json");
  ASSERT_EQ(run_command(
                kiln_binary() + " profile --from-traces " + step_dir() + " --out " + bare + " 2>&1",
                &out),
            0)
      << out;
  EXPECT_NE(out.find("emit_nvtx(record_shapes=True)"), std::string::npos) << out;
  ASSERT_NE(
      run_command(kiln_binary() + " run --backend cpu --targets reduce,softmax --budget 5s --out " +
                      dir.file("run") + " --shapes " + bare + " 2>&1",
                  &out),
      0)
      << out;
  EXPECT_NE(out.find("the plan holds no shapes for this run's targets"), std::string::npos) << out;
}

TEST(ProfileCli, SpeedupChangesTheGains) {
  testing::TempDir dir;
  std::string out;
  ASSERT_EQ(run_command(kiln_binary() + " profile --from-traces " + step_dir() +
                            " --speedup 4 --out " + dir.file("p.json") + " 2>/dev/null",
                        &out),
            0)
      << out;
  EXPECT_NE(out.find("gain@4x"), std::string::npos) << out;
  EXPECT_NE(out.find("1.818x"), std::string::npos) << out;  // matmul: 1 / (0.4 + 0.6 / 4)
}

TEST(ProfileCli, FromTracesExitCodes) {
  std::string out;
  EXPECT_EQ(run_command(kiln_binary() + " profile --from-traces /nonexistent/traces 2>&1", &out), 2) << out;
  EXPECT_NE(out.find("no trace folder /nonexistent/traces"), std::string::npos) << out;
  testing::TempDir empty;
  EXPECT_EQ(run_command(kiln_binary() + " profile --from-traces " + empty.path() + " --out " +
                            empty.file("p.json") + " 2>&1",
                        &out),
            1)
      << out;
  EXPECT_NE(out.find("no CUDA kernels were recorded: no trace files"), std::string::npos) << out;
  EXPECT_FALSE(std::filesystem::exists(empty.file("p.json")));
  EXPECT_EQ(run_command(kiln_binary() + " profile --from-traces " + step_dir() + " -- /bin/true 2>&1", &out), 2)
      << out;
  EXPECT_EQ(run_command(kiln_binary() + " profile --from-traces " + step_dir() + " --speedup -1 2>&1", &out), 2)
      << out;
}

TEST(ProfileCli, NoCommandIsAUsageError) {
  std::string out;
  EXPECT_EQ(run_command(kiln_binary() + " profile 2>&1", &out), 2) << out;
  EXPECT_NE(out.find("no program to profile"), std::string::npos) << out;
}

TEST(ProfileCli, MissingInjectionLibrarySaysWhatToDo) {
  std::string out;
  EXPECT_EQ(run_command(kiln_binary() + " profile --inject /nonexistent/libkiln_inject.so -- /bin/true 2>&1", &out),
            2)
      << out;
  EXPECT_NE(out.find("no injection library at /nonexistent/libkiln_inject.so"), std::string::npos) << out;
  EXPECT_NE(out.find("(--inject)"), std::string::npos) << out;
}

// Without a GPU (or for a program that uses none) nothing is recorded: kiln says so and returns
// the program's own exit code. Where this build has no injection library, the message says that.
TEST(ProfileCli, ProgramWithoutCudaGetsAClearMessageAndItsExitCode) {
  if (!std::filesystem::exists(default_inject())) {
    std::string out;
    EXPECT_EQ(run_command(kiln_binary() + " profile -- /bin/true 2>&1", &out), 2) << out;
    EXPECT_NE(out.find("no injection library"), std::string::npos) << out;
    GTEST_SKIP() << "built without libkiln_inject.so (no CUPTI): " << default_inject();
  }
  testing::TempDir dir;
  std::string out;
  EXPECT_EQ(run_command(kiln_binary() + " profile --out " + dir.file("p.json") + " -- /bin/true 2>&1", &out), 0)
      << out;
  EXPECT_NE(out.find("no CUDA kernels were recorded: no process of the program initialised CUDA"),
            std::string::npos)
      << out;
  EXPECT_FALSE(std::filesystem::exists(dir.file("p.json")));
  EXPECT_EQ(run_command(kiln_binary() + " profile --out " + dir.file("p.json") + " -- sh -c 'exit 7' 2>&1", &out), 7)
      << out;
  EXPECT_NE(out.find("exited with code 7"), std::string::npos) << out;
  // The program sees the profiling environment; --keep-traces keeps the (empty) folder.
  const std::string traces = dir.file("traces");
  EXPECT_EQ(run_command(kiln_binary() + " profile --keep-traces " + traces + " --out " + dir.file("p.json") +
                            " -- sh -c 'test -n \"$CUDA_INJECTION64_PATH\" && test \"$KILN_PROFILE_DIR\" = " +
                            traces + "' 2>&1",
                        &out),
            0)
      << out;
  EXPECT_TRUE(std::filesystem::is_directory(traces));
  // A program that cannot be started is kiln's failure (2), with its name.
  EXPECT_EQ(run_command(kiln_binary() + " profile -- /nonexistent/program 2>&1", &out), 2) << out;
  EXPECT_NE(out.find("cannot start '/nonexistent/program'"), std::string::npos) << out;
}

TEST(ProfileCli, KeepTracesRefusesAFolderThatHoldsTraces) {
  if (!std::filesystem::exists(default_inject())) GTEST_SKIP() << "built without libkiln_inject.so";
  std::string out;
  EXPECT_EQ(run_command(kiln_binary() + " profile --keep-traces " + step_dir() + " -- /bin/true 2>&1", &out), 2)
      << out;
  EXPECT_NE(out.find("already holds traces"), std::string::npos) << out;
}

}  // namespace
}  // namespace kiln
