// A small SVG chart builder for the HTML report: scatter points and step lines on linear or log10
// axes, with tick values a reader can take in at a glance, axis titles, a legend and horizontal
// reference lines (a roof, a floor). It writes plain SVG markup for inline use in an HTML page:
// no script, no external resource, no namespace URL (inline SVG in HTML needs none).
//
// Every chart is one <svg class="plot" data-plot="NAME" data-points="N">, where N is the number of
// data points drawn, each one <circle class="pt ..."> with a <title> tooltip. The viewBox is 1200
// units wide and the page scales it to its column (CSS width:100%), so text sizes are chosen for
// that scale (see html.cc's style sheet).
#pragma once

#include <string>
#include <vector>

#include "report/format.h"

namespace kiln::report::svg {

constexpr double kWidth = 1200;  // the viewBox width

enum class Scale { kLinear, kLog10 };

struct Axis {
  std::string title;
  Unit unit = Unit::kPlain;
  Scale scale = Scale::kLinear;
  bool from_zero = false;  // linear axes: include 0 (evaluation numbers, seconds since the start)
  bool whole = false;      // linear axes: ticks at whole numbers only (counts)
};

struct Point {
  double x = 0;
  double y = 0;
  std::string css_class;  // added to "pt": "kept", "seed", ...
  std::string tooltip;    // the point's <title>: what a reader sees on hover
};

struct Series {
  std::string css_class;  // the series' colour: "c0".."c7", "best", ...
  std::vector<Point> points;
  bool dots = true;        // one circle per point (these are the data points counted)
  bool step_line = false;  // a line that holds each y until the next point's x, then steps
};

// A horizontal line across the plot at `y`, labelled at its right end.
struct RefLine {
  double y = 0;
  std::string label;
  std::string css_class = "roof";
};

struct LegendEntry {
  enum class Shape { kDot, kLine, kDash };
  std::string label;
  std::string css_class;  // the series' (or reference line's) class: the swatch takes its colour
  Shape shape = Shape::kDot;
  std::string point_class;  // for kDot: the points' own class ("kept", "seed"), drawn as they are
};

struct Chart {
  std::string name;         // data-plot: the chart's identity on the page (tests look it up)
  std::string description;  // the chart's <title>: one sentence saying what it shows
  Axis x;
  Axis y;
  std::vector<Series> series;
  std::vector<RefLine> lines;
  std::vector<LegendEntry> legend;
  double height = 430;  // viewBox height
};

struct Tick {
  double value = 0;
  std::string label;
};

// The ticks of an axis over the data range [lo, hi]; `lo` and `hi` are widened to the range the
// axis will show (nice round ends for a linear axis, a margin for a log axis). A log axis needs
// lo > 0.
std::vector<Tick> ticks(const Axis& axis, double& lo, double& hi);

// The number of data points render() draws for `chart`: dotted points with finite coordinates
// (and positive ones on a log axis).
int point_count(const Chart& chart);

// The chart as one <svg> element.
std::string render(const Chart& chart);

}  // namespace kiln::report::svg
