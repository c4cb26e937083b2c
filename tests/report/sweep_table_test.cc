// The report's dispatch table of a shape sweep: each shape's best, and the one configuration for
// every shape (timed at the most shapes, then the fastest over them) with its time per shape and
// the geometric mean of its time over each best; in both renderers.
#include "report/sweep_table.h"

#include <gtest/gtest.h>

#include <cmath>

#include "report/html.h"
#include "report/markdown.h"

namespace kiln::report {
namespace {

ResultRow timed(const std::string& shape, std::map<std::string, std::string> params, double us,
                const std::string& outcome = "verified") {
  ResultRow r;
  r.target = "rmsnorm";
  r.gpu_model = "GPU A";
  r.shape = shape;
  r.kind = "child";
  r.outcome = outcome;
  r.median_us = outcome == "verified" ? us : 0;
  r.params = std::move(params);
  r.candidate_id = shape + "-" + std::to_string(us);
  return r;
}

RunData sweep_run() {
  RunData run;
  run.backend = "cuda";
  for (const auto& [shape, best] : std::vector<std::pair<std::string, double>>{
           {"M=1,N=4096", 4.0}, {"M=512,N=4096", 7.0}, {"M=4096,N=4096", 27.0}}) {
    UnitSummary u;
    u.target = "rmsnorm";
    u.gpu_model = "GPU A";
    u.shape = shape;
    u.best_us = best;
    u.best_label = "template shape best";
    run.units.push_back(u);
  }
  const std::map<std::string, std::string> a = {{"BLOCK", "512"}}, b = {{"BLOCK", "256"}},
                                           c = {{"BLOCK", "128"}};
  // a: at every shape, 2x, 1x and 1x the bests; b: faster, but at two shapes only; c: at one.
  run.rows = {timed("M=1,N=4096", a, 8.0),     timed("M=512,N=4096", a, 7.0),
              timed("M=4096,N=4096", a, 27.0), timed("M=4096,N=4096", a, 30.0),
              timed("M=1,N=4096", b, 4.0),     timed("M=512,N=4096", b, 7.0),
              timed("M=1,N=4096", c, 4.0),     timed("M=4096,N=4096", c, 1.0, "wrong_answer")};
  UnitSummary plain;  // a population outside the sweep
  plain.target = "softmax";
  plain.best_us = 10;
  run.units.push_back(plain);
  return run;
}

TEST(ReportSweepTable, TheSingleConfigurationIsTimedAtTheMostShapesThenTheFastest) {
  const std::vector<SweepTable> tables = sweep_tables(sweep_run());
  ASSERT_EQ(tables.size(), 1u);  // softmax was not swept
  const SweepTable& t = tables[0];
  EXPECT_EQ(t.target, "rmsnorm");
  EXPECT_EQ(t.gpu_model, "GPU A");
  ASSERT_EQ(t.entries.size(), 3u);
  EXPECT_EQ(t.single_params, (std::map<std::string, std::string>{{"BLOCK", "512"}}));
  EXPECT_EQ(t.single_shapes, 3u);
  EXPECT_NEAR(t.single_over_table, std::cbrt(2.0), 1e-12);  // 2x, 1x, 1x: its fastest at each
  EXPECT_EQ(t.entries[0].single_us, 8.0);
  EXPECT_EQ(t.entries[2].single_us, 27.0);  // the faster of its two timings there
  const std::string sentence = single_config_sentence(t);
  EXPECT_NE(sentence.find("BLOCK=512"), std::string::npos) << sentence;
  EXPECT_NE(sentence.find("3 of 3 shapes"), std::string::npos) << sentence;
  EXPECT_NE(sentence.find("1.26x"), std::string::npos) << sentence;
}

TEST(ReportSweepTable, NoConfigurationAtTwoShapesMeansNoSingleFigure) {
  RunData run = sweep_run();
  run.rows.resize(1);
  const std::vector<SweepTable> tables = sweep_tables(run);
  ASSERT_EQ(tables.size(), 1u);
  EXPECT_TRUE(tables[0].single_params.empty());
  EXPECT_EQ(tables[0].entries[0].single_us, 0);
  EXPECT_NE(single_config_sentence(tables[0]).find("No configuration"), std::string::npos);
  RunData plain;
  plain.units.push_back(UnitSummary{});
  EXPECT_TRUE(sweep_tables(plain).empty());
}

TEST(ReportSweepTable, BothRenderersShowTheTable) {
  const RunData run = sweep_run();
  const std::string md = render_markdown(run);
  EXPECT_NE(md.find("## Dispatch table: rmsnorm @ GPU A"), std::string::npos) << md;
  EXPECT_NE(md.find("| M=1,N=4096 |"), std::string::npos) << md;
  EXPECT_NE(md.find("2.00x"), std::string::npos) << md;  // 8 us against 4 at one token
  EXPECT_NE(md.find("takes 1.26x"), std::string::npos) << md;
  const std::string html = render_html(run);
  EXPECT_NE(html.find("<h2>Dispatch table: rmsnorm @ GPU A</h2>"), std::string::npos);
  EXPECT_NE(html.find("<code>M=4096,N=4096</code>"), std::string::npos);
}

}  // namespace
}  // namespace kiln::report
