// The markdown report of the synthetic run (sample_run.h): its tables, the lineage, the export
// commands, and failure texts that cannot break a table or become markup.
#include "report/markdown.h"

#include <gtest/gtest.h>

#include "tests/report/sample_run.h"

namespace kiln {
namespace {

using testing::sample_run;

TEST(ReportMarkdown, HasTheSummaryAndEveryTable) {
  const std::string md = report::render_markdown(sample_run());
  EXPECT_EQ(md.rfind("# kiln report: run-20250101-0001\n", 0), 0u) << md;
  EXPECT_NE(md.find("## Summary"), std::string::npos);
  EXPECT_NE(md.find("| target @ GPU model | state | evals | failures | kept | seed time | best "
                    "time | speedup | fraction of floor |\n| --- | --- | ---: |"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("| rmsnorm @ NVIDIA H100 80GB HBM3 | converged: 40 proposals without a new "
                    "best | 16 | 4 | 4 | 100 µs | 52 µs | 1.92x | 40% |"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("## rmsnorm @ NVIDIA H100 80GB HBM3"), std::string::npos);
  EXPECT_NE(md.find("### Lineage of the best"), std::string::npos);
  EXPECT_NE(md.find("| 2 | a04ccccccccc | llm rewrite | claude-test | 71 µs | 1.25x (20.2% less "
                    "time) |"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("kiln export rmsnorm --out /runs/night1 --gpu-model 'NVIDIA H100 80GB HBM3' "
                    "--format cuda --to rmsnorm-cuda"),
            std::string::npos);
  EXPECT_NE(md.find("| wrong_answer | 2 |"), std::string::npos);
  EXPECT_NE(md.find("## Evaluators"), std::string::npos);
  EXPECT_NE(md.find("| gpu0@node-a | 14 | 21 s | 39 s |"), std::string::npos) << md;
  EXPECT_NE(md.find("## LLM models"), std::string::npos);
  EXPECT_NE(md.find("| claude-test | 5 | 12000 | 3400 | $0.4200 | 1 | $0.4200 |"),
            std::string::npos)
      << md;
}

TEST(ReportMarkdown, FailureTextsCannotBreakATableOrBecomeMarkup) {
  report::RunData run = sample_run();
  for (auto& r : run.rows)
    if (r.candidate_id == testing::cand("a03")) r.failure = "compile: a | b\nsecond line";
  const std::string md = report::render_markdown(run);
  EXPECT_EQ(md.find("<script>"), std::string::npos);
  EXPECT_NE(md.find("&lt;script&gt;alert(1)&lt;/script&gt;&"), std::string::npos);
  EXPECT_NE(md.find("compile: a \\| b |"), std::string::npos) << md;
}

TEST(ReportMarkdown, AnEmptyRunSaysThereIsNothingYet) {
  report::RunData run;
  run.source = "kiln-run";
  const std::string md = report::render_markdown(run);
  EXPECT_NE(md.find("Nothing to report yet"), std::string::npos) << md;
}

}  // namespace
}  // namespace kiln
