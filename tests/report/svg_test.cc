// The SVG chart builder and the number formatting behind its labels: round ticks, units a reader
// expects, escaping, and one counted circle per drawable point.
#include "report/svg.h"

#include <gtest/gtest.h>

#include <string>

#include "report/format.h"

namespace kiln::report {
namespace {

std::vector<std::string> labels(const std::vector<svg::Tick>& ticks) {
  std::vector<std::string> out;
  for (const auto& t : ticks) out.push_back(t.label);
  return out;
}

size_t count(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

TEST(ReportFormat, WritesNumbersInTheUnitsAReaderExpects) {
  EXPECT_EQ(with_unit(0.85, Unit::kMicroseconds), "850 ns");
  EXPECT_EQ(with_unit(12.5, Unit::kMicroseconds), "12.5 µs");
  EXPECT_EQ(with_unit(1500, Unit::kMicroseconds), "1.5 ms");
  EXPECT_EQ(with_unit(2.5e6, Unit::kMicroseconds), "2.5 s");
  EXPECT_EQ(with_unit(45, Unit::kSeconds), "45 s");
  EXPECT_EQ(with_unit(90, Unit::kSeconds), "90 s");
  EXPECT_EQ(with_unit(150, Unit::kSeconds), "2.5 min");
  EXPECT_EQ(with_unit(3 * 3600, Unit::kSeconds), "3 h");
  EXPECT_EQ(with_unit(3.35e12, Unit::kBytesPerSecond), "3.35 TB/s");
  EXPECT_EQ(with_unit(850e9, Unit::kBytesPerSecond), "850 GB/s");
  EXPECT_EQ(with_unit(9.89e14, Unit::kFlopsPerSecond), "989 TFLOP/s");
  EXPECT_EQ(with_unit(1234, Unit::kPlain), "1234");
  EXPECT_EQ(number(0.25), "0.25");
  EXPECT_EQ(number(3.0), "3");
  EXPECT_EQ(speedup(1.923), "1.92x");
  EXPECT_EQ(percent(0.4), "40%");
  EXPECT_EQ(percent(0.0036), "0.36%");
  EXPECT_EQ(dollars(0.42), "$0.4200");
  EXPECT_EQ(dollars(12.4), "$12.40");
}

TEST(ReportFormat, EscapesForXmlMarkdownAndTheShell) {
  EXPECT_EQ(xml_escape("<script>alert(1)</script>&\"'"),
            "&lt;script&gt;alert(1)&lt;/script&gt;&amp;&quot;&#39;");
  EXPECT_EQ(xml_escape(std::string("a\x1b[31mb")), "a [31mb");
  EXPECT_EQ(md_cell("a|b\nc"), "a\\|b c");
  EXPECT_EQ(md_cell(""), "-");
  EXPECT_EQ(shell_word("runs/night1"), "runs/night1");
  EXPECT_EQ(shell_word("NVIDIA H100"), "'NVIDIA H100'");
  EXPECT_EQ(shell_word("it's"), "'it'\\''s'");
  EXPECT_EQ(first_line("one\ntwo", 100), "one");
  EXPECT_EQ(first_line("abcdef", 3), "abc...");
  // Never cut inside a multi-byte character: "µ" is two bytes.
  EXPECT_EQ(first_line("aµb", 2), "a...");
}

TEST(ReportSvg, LinearTicksAreRoundAndCoverTheData) {
  svg::Axis axis{"evaluations", Unit::kPlain, svg::Scale::kLinear, true};
  double lo = 1, hi = 57;
  const auto t = svg::ticks(axis, lo, hi);
  EXPECT_EQ(labels(t), (std::vector<std::string>{"0", "10", "20", "30", "40", "50", "60"}));
  EXPECT_EQ(lo, 0);
  EXPECT_EQ(hi, 60);
}

TEST(ReportSvg, CountsGetWholeNumberTicks) {
  svg::Axis axis{"evaluation number", Unit::kPlain, svg::Scale::kLinear, true, true};
  double lo = 1, hi = 4;
  EXPECT_EQ(labels(svg::ticks(axis, lo, hi)), (std::vector<std::string>{"0", "1", "2", "3", "4"}));
}

TEST(ReportSvg, SecondsTicksSwitchToMinutesForLongRuns) {
  svg::Axis axis{"time", Unit::kSeconds, svg::Scale::kLinear, true};
  double lo = 0, hi = 600;
  const auto t = svg::ticks(axis, lo, hi);
  ASSERT_FALSE(t.empty());
  EXPECT_EQ(t.front().label, "0 min");
  EXPECT_EQ(t.back().label, "10 min");
}

TEST(ReportSvg, TickPrefixesFollowTheLargestTickNotTheMargin) {
  // An axis that ends just above 1 PFLOP/s is labelled in TFLOP/s up to its last tick.
  svg::Axis axis{"rate", Unit::kFlopsPerSecond, svg::Scale::kLog10, false};
  double lo = 3.3e14, hi = 9.89e14;
  const auto l = labels(svg::ticks(axis, lo, hi));
  EXPECT_NE(std::find(l.begin(), l.end(), "400 TFLOP/s"), l.end());
  EXPECT_NE(std::find(l.begin(), l.end(), "700 TFLOP/s"), l.end());
  for (const auto& s : l) EXPECT_EQ(s.find("0."), std::string::npos) << s;
}

TEST(ReportSvg, LogTicksUsePowersOfTenAndUnitPrefixes) {
  svg::Axis axis{"time", Unit::kMicroseconds, svg::Scale::kLog10, false};
  double lo = 8, hi = 20000;
  const auto t = svg::ticks(axis, lo, hi);
  const auto l = labels(t);
  EXPECT_NE(std::find(l.begin(), l.end(), "10 µs"), l.end());
  EXPECT_NE(std::find(l.begin(), l.end(), "100 µs"), l.end());
  EXPECT_NE(std::find(l.begin(), l.end(), "1 ms"), l.end());
  EXPECT_NE(std::find(l.begin(), l.end(), "10 ms"), l.end());
  EXPECT_LT(lo, 8);
  EXPECT_GT(hi, 20000);
}

TEST(ReportSvg, NarrowLogRangesStillGetSeveralTicks) {
  svg::Axis axis{"time", Unit::kMicroseconds, svg::Scale::kLog10, false};
  double lo = 52, hi = 100;
  const auto t = svg::ticks(axis, lo, hi);
  EXPECT_GE(t.size(), 3u);
  for (const auto& k : t) {
    EXPECT_GE(k.value, lo);
    EXPECT_LE(k.value, hi);
  }
}

TEST(ReportSvg, RendersOneCircleWithATooltipPerDrawablePoint) {
  svg::Chart c;
  c.name = "t<1>";
  c.description = "a & b";
  c.x = {"x", Unit::kPlain, svg::Scale::kLinear, true};
  c.y = {"y", Unit::kMicroseconds, svg::Scale::kLog10, false};
  svg::Series s{"c0", {}, true, true};
  s.points = {{1, 10, "", "one <b>"}, {2, 5, "kept", "two"}, {3, 0, "", "zero: not on a log axis"}};
  c.series = {s};
  c.lines = {{2, "floor 2 µs", "floor"}};
  c.legend = {{"points", "c0", svg::LegendEntry::Shape::kDot, ""}};
  EXPECT_EQ(svg::point_count(c), 2);
  const std::string out = svg::render(c);
  EXPECT_EQ(out.rfind("<svg class=\"plot\" data-plot=\"t&lt;1&gt;\" data-points=\"2\"", 0), 0u)
      << out;
  EXPECT_EQ(count(out, "<circle class=\"pt"), 2u);
  EXPECT_EQ(count(out, "<circle class=\"pt kept\""), 1u);
  EXPECT_NE(out.find("<title>one &lt;b&gt;</title>"), std::string::npos);
  EXPECT_NE(out.find("<title>a &amp; b</title>"), std::string::npos);
  EXPECT_NE(out.find("floor 2 µs"), std::string::npos);
  EXPECT_NE(out.find("viewBox=\"0 0 1200.0 "), std::string::npos);
  EXPECT_EQ(out.find("http"), std::string::npos);  // no namespace URL: inline SVG needs none
}

TEST(ReportSvg, AnEmptyChartIsStillAValidSvg) {
  svg::Chart c;
  c.name = "empty";
  c.y.scale = svg::Scale::kLog10;
  const std::string out = svg::render(c);
  EXPECT_NE(out.find("data-points=\"0\""), std::string::npos);
  EXPECT_NE(out.find("</svg>"), std::string::npos);
  EXPECT_EQ(out.find("nan"), std::string::npos);
  EXPECT_EQ(out.find("inf"), std::string::npos);
}

}  // namespace
}  // namespace kiln::report
