// The HTML report of the synthetic run (sample_run.h): one chart of each kind per target with the
// points it should show, no script or outside URL, the lineage in order with its gains, the
// failures escaped, and pages for runs with missing arrival times or no data at all.
#include "report/html.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

#include "tests/report/sample_run.h"

namespace kiln {
namespace {

using testing::sample_run;

size_t count(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

std::string attr(const std::string& tag, const std::string& name) {
  const std::string key = name + "=\"";
  const size_t at = tag.find(key);
  if (at == std::string::npos) return "";
  const size_t from = at + key.size();
  return tag.substr(from, tag.find('"', from) - from);
}

struct Plot {
  int declared = -1;  // data-points
  int circles = 0;    // <circle class="pt..."> inside it
  int copies = 0;     // how many plots carry the name
};

// Every <svg class="plot"> of the page by its data-plot name.
std::map<std::string, Plot> plots(const std::string& html) {
  std::map<std::string, Plot> out;
  for (size_t at = html.find("<svg class=\"plot\""); at != std::string::npos;
       at = html.find("<svg class=\"plot\"", at + 1)) {
    const size_t end = html.find("</svg>", at);
    const std::string tag = html.substr(at, html.find('>', at) - at);
    Plot& p = out[attr(tag, "data-plot")];
    ++p.copies;
    p.declared = std::stoi(attr(tag, "data-points"));
    p.circles = static_cast<int>(count(html.substr(at, end - at), "<circle class=\"pt"));
  }
  return out;
}

// The part of `html` from `from` to the next `to` after it.
std::string between(const std::string& html, const std::string& from, const std::string& to,
                    size_t start = 0) {
  const size_t a = html.find(from, start);
  if (a == std::string::npos) return "";
  const size_t b = html.find(to, a);
  return html.substr(a, b == std::string::npos ? std::string::npos : b - a);
}

const std::string kRms = std::string("rmsnorm@") + testing::kModel;
const std::string kMat = std::string("matmul@") + testing::kModel;

TEST(ReportHtml, OnePlotPerChartKindPerUnitWithTheRowsItShouldShow) {
  const std::string html = report::render_html(sample_run());
  const std::map<std::string, int> expected = {{kRms + "/time", 12},     {kRms + "/evals", 12},
                                               {kRms + "/roofline", 12}, {kMat + "/time", 10},
                                               {kMat + "/evals", 10},    {kMat + "/roofline", 10},
                                               {"farm/workers", 28}};
  const std::map<std::string, Plot> found = plots(html);
  EXPECT_EQ(found.size(), expected.size());
  for (const auto& [name, n] : expected) {
    auto it = found.find(name);
    ASSERT_NE(it, found.end()) << "no plot " << name;
    EXPECT_EQ(it->second.copies, 1) << name;
    EXPECT_EQ(it->second.declared, n) << name;
    EXPECT_EQ(it->second.circles, n) << name;
  }
}

TEST(ReportHtml, MarksKeptAndCrownedPoints) {
  const std::string html = report::render_html(sample_run());
  // rmsnorm: a01 kept+crowned, a04 kept+crowned, a08 kept+crowned, a10 kept = 7 per chart.
  const std::string time_plot = between(html, "data-plot=\"" + kRms + "/time\"", "</svg>");
  EXPECT_EQ(count(time_plot, "<circle class=\"pt kept\""), 7u);
  EXPECT_EQ(count(time_plot, "<circle class=\"pt seed\""), 1u);
  // The best-so-far line steps down at each crown.
  EXPECT_NE(time_plot.find("class=\"best\""), std::string::npos);
}

TEST(ReportHtml, HasNoScriptAndNoOutsideUrl) {
  const std::string html = report::render_html(sample_run());
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("http://"), std::string::npos);
  EXPECT_EQ(html.find("https://"), std::string::npos);
  EXPECT_EQ(html.find("src="), std::string::npos);
  EXPECT_EQ(html.find("url("), std::string::npos);
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_NE(html.find("</html>"), std::string::npos);
}

TEST(ReportHtml, EscapesAHostileFailureText) {
  const std::string html = report::render_html(sample_run());
  EXPECT_NE(html.find("sweep: &lt;script&gt;alert(1)&lt;/script&gt;&amp;"), std::string::npos);
  EXPECT_EQ(html.find("alert(1)</script>"), std::string::npos);
}

TEST(ReportHtml, LineageListsTheChainInOrderWithItsGains) {
  const std::string html = report::render_html(sample_run());
  const std::string block = between(html, "Lineage of the best", "Winning configuration");
  ASSERT_FALSE(block.empty());
  size_t last = 0;
  for (const char* id : {"a00ccccccccc", "a01ccccccccc", "a04ccccccccc", "a08ccccccccc"}) {
    const size_t at = block.find(id);
    ASSERT_NE(at, std::string::npos) << id << " missing from\n" << block;
    EXPECT_GT(at, last) << id << " out of order";
    last = at;
  }
  EXPECT_EQ(block.find("a02ccccccccc"), std::string::npos);  // reverted: not on the path
  // 100 -> 89 -> 71 -> 52 us (the crowned re-times).
  EXPECT_NE(block.find("1.12x (11% less time)"), std::string::npos) << block;
  EXPECT_NE(block.find("1.25x (20.2% less time)"), std::string::npos) << block;
  EXPECT_NE(block.find("1.37x (26.8% less time)"), std::string::npos) << block;
  EXPECT_NE(block.find("llm rewrite"), std::string::npos);
  EXPECT_NE(block.find("claude-test"), std::string::npos);

  const std::string matmul =
      between(html, "Lineage of the best", "Winning configuration", html.find("<h2>matmul"));
  EXPECT_NE(matmul.find("b00ccccccccc"), std::string::npos);
  EXPECT_NE(matmul.find("b02ccccccccc"), std::string::npos);
  EXPECT_NE(matmul.find("b04ccccccccc"), std::string::npos);
  EXPECT_NE(matmul.find("1.31x"), std::string::npos) << matmul;  // 400 / 305
  EXPECT_NE(matmul.find("1.23x"), std::string::npos) << matmul;  // 305 / 248
}

TEST(ReportHtml, ShowsTheRoofTheConfigurationTheFailuresAndTheFarm) {
  const std::string html = report::render_html(sample_run());
  EXPECT_NE(html.find("peak 3.35 TB/s"), std::string::npos);    // rmsnorm: bandwidth-bound
  EXPECT_NE(html.find("peak 989 TFLOP/s"), std::string::npos);  // matmul: compute-bound
  EXPECT_NE(html.find("template BLOCK=256,VEC=8"), std::string::npos);
  EXPECT_NE(html.find("kiln export rmsnorm --out /runs/night1 --gpu-model &#39;NVIDIA H100 80GB "
                      "HBM3&#39; --format cuda --to rmsnorm-cuda"),
            std::string::npos);
  EXPECT_NE(html.find("--format torch --to rmsnorm-torch"), std::string::npos);
  const std::string failures = between(html, "Failures by reason", "</table>");
  EXPECT_NE(failures.find("wrong_answer</td><td class=\"n\">2</td>"), std::string::npos)
      << failures;
  EXPECT_NE(failures.find("compile_error</td><td class=\"n\">1</td>"), std::string::npos);
  EXPECT_NE(failures.find("timeout</td><td class=\"n\">1</td>"), std::string::npos);
  // 14 evaluations each, 21 s busy of the 60 s run, 39 s idle.
  const std::string workers = between(html, "<section id=\"workers\">", "</section>");
  EXPECT_NE(workers.find("gpu0@node-a</code></td><td class=\"n\">14</td><td class=\"n\">21 "
                         "s</td><td class=\"n\">39 s</td>"),
            std::string::npos)
      << workers;
  const std::string llm = between(html, "<section id=\"llm\">", "</section>");
  EXPECT_NE(llm.find("claude-test"), std::string::npos);
  EXPECT_NE(llm.find("$0.4200"), std::string::npos);
}

TEST(ReportHtml, WithoutArrivalTimesSaysSoInsteadOfDrawingOverTime) {
  report::RunData run = sample_run();
  for (auto& r : run.rows) r.at_s = -1;
  const std::string html = report::render_html(run);
  const std::map<std::string, Plot> found = plots(html);
  EXPECT_EQ(found.count(kRms + "/time"), 0u);
  EXPECT_EQ(found.count("farm/workers"), 0u);
  EXPECT_EQ(found.at(kRms + "/evals").circles, 12);
  EXPECT_EQ(count(html, "do not record when they arrived"), 3u);  // two targets and the farm
}

TEST(ReportHtml, AnEmptyRunIsAValidPageThatSaysThereIsNothingYet) {
  report::RunData run;
  run.source = "kiln-run";
  const std::string html = report::render_html(run);
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_NE(html.find("Nothing yet"), std::string::npos);
  EXPECT_EQ(html.find("<svg"), std::string::npos);
  EXPECT_NE(html.find("</html>"), std::string::npos);
}

TEST(ReportHtml, AUnitWithoutResultsSaysSo) {
  report::RunData run = sample_run();
  run.rows.clear();
  const std::string html = report::render_html(run);
  EXPECT_EQ(count(html, "No results of this target yet."), 2u);
  EXPECT_EQ(html.find("<svg"), std::string::npos);
}

}  // namespace
}  // namespace kiln
