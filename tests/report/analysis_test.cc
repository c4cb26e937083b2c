// The figures both renderers share, on the synthetic run (sample_run.h): the best so far, the
// bound resource, the lineage with its gains, failures by reason and the evaluators' time.
#include "report/analysis.h"

#include <gtest/gtest.h>

#include "tests/report/sample_run.h"

namespace kiln::report {
namespace {

using testing::cand;
using testing::sample_run;

// A shape sweep's populations share target and GPU model: each is its own unit, with its own
// rows, name, chart key and one export command (the dispatch table).
TEST(ReportAnalysis, ASweepsShapesAreSeparateUnits) {
  RunData run = sample_run();
  run.units.resize(1);
  UnitSummary small = run.units[0], large = run.units[0];
  small.shape = "M=1,N=4096";
  large.shape = "M=4096,N=4096";
  run.units = {small, large};
  const size_t rows = run.rows.size();
  for (size_t i = 0; i < rows; ++i) {
    run.rows[i].target = small.target;
    run.rows[i].gpu_model = small.gpu_model;
    run.rows[i].shape = i < 5 ? large.shape : small.shape;
  }
  EXPECT_EQ(rows_of(run, small).size(), rows - 5);
  EXPECT_EQ(rows_of(run, large).size(), 5u);
  EXPECT_NE(unit_key(small), unit_key(large));
  EXPECT_NE(unit_label(small).find("M=1,N=4096"), std::string::npos) << unit_label(small);
  const std::vector<std::string> cmds = export_commands(run, large);
  ASSERT_EQ(cmds.size(), 1u);
  EXPECT_EQ(cmds[0].find("--gpu-model"), std::string::npos) << cmds[0];
}

TEST(ReportAnalysis, BestSoFarFollowsTheSeedAndTheCrowns) {
  const RunData run = sample_run();
  const auto rows = rows_of(run, run.units[0]);
  ASSERT_EQ(rows.size(), 16u);
  const std::vector<double> best = best_so_far(rows);
  const std::vector<double> want = {100, 100, 89, 89, 89, 89, 71, 71,
                                    71,  71,  71, 52, 52, 52, 52, 52};
  EXPECT_EQ(best, want);
}

TEST(ReportAnalysis, WithoutVerdictsTheBestIsTheFastestVerifiedTime) {
  RunData run = sample_run();
  for (auto& r : run.rows) r.verdict.clear();
  const auto best = best_so_far(rows_of(run, run.units[0]));
  EXPECT_EQ(best.back(), 50);  // a08's first timing: an older folder cannot tell the re-time apart
}

TEST(ReportAnalysis, TheRoofIsTheResourceThatBounds) {
  const RunData run = sample_run();
  const Roof rms = roof_of(rows_of(run, run.units[0]));
  EXPECT_TRUE(rms.bandwidth);
  EXPECT_EQ(rms.peak, 3.35e12);
  const Roof mat = roof_of(rows_of(run, run.units[1]));
  EXPECT_FALSE(mat.bandwidth);
  EXPECT_EQ(mat.peak, 9.89e14);
}

TEST(ReportAnalysis, LineageRunsFromTheSeedToTheBest) {
  const RunData run = sample_run();
  const Lineage l = lineage_of(run.units[0], rows_of(run, run.units[0]));
  ASSERT_EQ(l.steps.size(), 4u);
  EXPECT_TRUE(l.note.empty()) << l.note;
  EXPECT_EQ(l.steps[0].candidate_id, cand("a00"));
  EXPECT_EQ(l.steps[0].op, "seed");
  EXPECT_EQ(l.steps[0].gain, 0);
  EXPECT_EQ(l.steps[1].candidate_id, cand("a01"));
  EXPECT_DOUBLE_EQ(l.steps[1].median_us, 89);  // its re-time, not its first timing
  EXPECT_DOUBLE_EQ(l.steps[1].gain, 100.0 / 89);
  EXPECT_EQ(l.steps[2].candidate_id, cand("a04"));
  EXPECT_EQ(l.steps[2].op, "llm rewrite");
  EXPECT_EQ(l.steps[2].model, "claude-test");
  EXPECT_DOUBLE_EQ(l.steps[2].gain, 89.0 / 71);
  EXPECT_EQ(l.steps[3].candidate_id, cand("a08"));
  EXPECT_DOUBLE_EQ(l.steps[3].gain, 71.0 / 52);
}

TEST(ReportAnalysis, LineageSaysWhereABrokenChainStops) {
  RunData run = sample_run();
  for (auto& r : run.rows)
    if (r.candidate_id == cand("a04")) r.parent_id = cand("zzz");
  const Lineage l = lineage_of(run.units[0], rows_of(run, run.units[0]));
  ASSERT_EQ(l.steps.size(), 2u);
  EXPECT_EQ(l.steps[0].candidate_id, cand("a04"));
  EXPECT_NE(l.note.find("zzzccccccccc is not among the results"), std::string::npos) << l.note;
}

TEST(ReportAnalysis, FailuresAreGroupedByOutcomeMostFrequentFirst) {
  const RunData run = sample_run();
  const auto groups = failures_of(rows_of(run, run.units[0]));
  ASSERT_EQ(groups.size(), 3u);
  EXPECT_EQ(groups[0].outcome, "wrong_answer");
  EXPECT_EQ(groups[0].count, 2u);
  EXPECT_EQ(groups[0].example, std::string("sweep: ") + testing::kHostile);
  EXPECT_EQ(groups[1].outcome, "compile_error");
  EXPECT_EQ(groups[2].outcome, "timeout");
}

TEST(ReportAnalysis, IdleTimeIsTheSpanLessBusyAndNeverNegative) {
  RunData run = sample_run();
  auto w = workers_of(run);
  ASSERT_EQ(w.size(), 2u);
  EXPECT_EQ(w[0].evaluator, "gpu0@node-a");
  EXPECT_EQ(w[0].evaluations, 14u);
  EXPECT_DOUBLE_EQ(w[0].busy_s, 21);
  EXPECT_DOUBLE_EQ(w[0].idle_s, 39);
  run.spent_s = 10;  // less than the busy time (clocks of different machines)
  EXPECT_EQ(workers_of(run)[0].idle_s, 0);
  run.spent_s = 0;  // unknown: the last arrival, 55 s, is the span
  EXPECT_DOUBLE_EQ(workers_of(run)[0].idle_s, 55 - 21);
}

TEST(ReportAnalysis, ExportCommandsFollowTheBackend) {
  RunData run = sample_run();
  auto cmds = export_commands(run, run.units[1]);
  ASSERT_EQ(cmds.size(), 2u);
  EXPECT_EQ(cmds[0],
            "kiln export matmul --out /runs/night1 --gpu-model 'NVIDIA H100 80GB HBM3' --format "
            "cuda --to matmul-cuda");
  run.backend = "cpu";
  run.units[1].gpu_model = "";
  cmds = export_commands(run, run.units[1]);
  EXPECT_EQ(cmds[0], "kiln export matmul --out /runs/night1 --format cpp --to matmul-cpp");
  EXPECT_EQ(cmds[1], "kiln export matmul --out /runs/night1 --format torch --to matmul-torch");
}

}  // namespace
}  // namespace kiln::report
