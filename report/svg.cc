// The SVG chart builder (see svg.h). Layout: a legend row on top, the plot area, tick labels and
// the axis titles on the left and at the bottom; all in viewBox units, 1200 wide.
#include "report/svg.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

namespace kiln::report::svg {
namespace {

constexpr double kTitleW = 44;  // the rotated y title, left of the tick labels
constexpr double kRight = 36;   // room for the last x tick label's half
constexpr double kBottom = 78;  // x tick labels and the x title
constexpr double kCharW = 8.6;  // a rough width of one character of legend text (15 px font)
constexpr double kLegendRow = 26;

bool usable(const Axis& axis, double v) {
  return std::isfinite(v) && (axis.scale == Scale::kLinear || v > 0);
}

// 1, 2 or 5 times a power of ten, near `raw`.
double nice_step(double raw) {
  if (!(raw > 0)) return 1;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  const double norm = raw / mag;
  const double pick = norm < 1.5 ? 1 : norm < 3 ? 2 : norm < 7 ? 5 : 10;
  return pick * mag;
}

// Evenly spaced round ticks, in the display unit, between `lo` and `hi` (which are in the base
// unit). `widen`: move lo and hi out to the first ticks outside them (a linear axis); else only
// ticks inside are kept (a narrow log axis).
std::vector<Tick> linear_ticks(const Axis& axis, double& lo, double& hi, bool widen, int count) {
  const Scaled s = scale_for(axis.unit, std::max(std::fabs(lo), std::fabs(hi)));
  double a = lo / s.divisor, b = hi / s.divisor;
  double step = nice_step((b - a) / count);
  if (axis.whole && step * s.divisor < 1) step = 1 / s.divisor;  // no "evaluation 2.5"
  const double eps = step * 1e-9;
  const double first =
      widen ? std::floor(a / step + 1e-9) * step : std::ceil(a / step - 1e-9) * step;
  const double last =
      widen ? std::ceil(b / step - 1e-9) * step : std::floor(b / step + 1e-9) * step;
  std::vector<Tick> out;
  double largest = 0;
  for (int i = 0; first + i * step <= last + eps && i < 100; ++i) {
    double v = first + i * step;
    if (std::fabs(v) < eps) v = 0;
    out.push_back({v * s.divisor, ""});
    largest = std::max(largest, std::fabs(v * s.divisor));
  }
  // The prefix of the largest tick shown, not of the margin above it: "800 TFLOP/s" rather
  // than "0.8 PFLOP/s" when the axis ends just above 1 PFLOP/s.
  const Scaled shown = scale_for(axis.unit, largest);
  for (auto& t : out) t.label = number(t.value / shown.divisor, 4) + shown.suffix;
  if (widen) {
    lo = first * s.divisor;
    hi = last * s.divisor;
  }
  return out;
}

struct Mapping {
  double lo = 0, hi = 1;    // the domain
  double from = 0, to = 1;  // the pixel range
  bool log = false;
  double operator()(double v) const {
    const double t = log ? (std::log10(v) - std::log10(lo)) / (std::log10(hi) - std::log10(lo))
                         : (v - lo) / (hi - lo);
    return from + t * (to - from);
  }
};

std::string fmt(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

std::string shape_swatch(const LegendEntry& e, double x, double y) {
  std::string o = "<g class=\"" + xml_escape(e.css_class) + "\">";
  if (e.shape == LegendEntry::Shape::kDot) {
    const bool big = e.point_class.find("kept") != std::string::npos;
    o += "<circle class=\"swatch" + (e.point_class.empty() ? "" : " " + xml_escape(e.point_class)) +
         "\" cx=\"" + fmt(x + 12) + "\" cy=\"" + fmt(y) + "\" r=\"" + (big ? "7" : "5") + "\"/>";
  } else {
    o += "<path class=\"" + std::string(e.shape == LegendEntry::Shape::kDash ? "ref" : "line") +
         "\" d=\"M" + fmt(x) + " " + fmt(y) + " h24\"/>";
  }
  return o + "</g>";
}

}  // namespace

std::vector<Tick> ticks(const Axis& axis, double& lo, double& hi) {
  if (axis.scale == Scale::kLinear) {
    if (axis.from_zero) {
      lo = std::min(lo, 0.0);
      hi = std::max(hi, 0.0);
    }
    if (!(hi > lo)) {
      const double pad = lo == 0 ? 1 : std::fabs(lo) * 0.1;
      hi = lo + pad;
      if (!(axis.from_zero && lo == 0)) lo -= pad;
    }
    return linear_ticks(axis, lo, hi, true, 7);
  }
  // Log10: a margin of a few percent of the decades shown, so no point sits on the frame.
  lo = std::max(lo, std::numeric_limits<double>::min());
  if (!(hi > lo)) {
    lo /= 1.5;
    hi = lo * 1.5 * 1.5;
  }
  double l = std::log10(lo), h = std::log10(hi);
  const double pad = (h - l) * 0.06 + 0.02;
  l -= pad;
  h += pad;
  lo = std::pow(10.0, l);
  hi = std::pow(10.0, h);
  const double decades = h - l;
  // Powers of ten, with round values between them while there is room; each labelled with
  // its own prefix ("500 µs", "1 ms").
  std::vector<double> mults = {1};
  if (decades <= 3) mults = {1, 2, 5};
  if (decades <= 1.5) mults = {1, 1.5, 2, 3, 4, 5, 7};
  std::vector<Tick> out;
  for (int e = static_cast<int>(std::floor(l)); e <= static_cast<int>(std::ceil(h)); ++e) {
    for (double m : mults) {
      const double v = m * std::pow(10.0, e);
      if (v >= lo && v <= hi) out.push_back({v, with_unit(v, axis.unit, 3)});
    }
  }
  // Within a fraction of a decade, round linear steps read better than one or two lone ticks.
  if (out.size() < 3) {
    double a = lo, b = hi;
    out = linear_ticks(axis, a, b, false, 5);
    for (auto& t : out) t.label = with_unit(t.value, axis.unit, 3);
  }
  return out;
}

int point_count(const Chart& chart) {
  int n = 0;
  for (const auto& s : chart.series) {
    if (!s.dots) continue;
    for (const auto& p : s.points) n += usable(chart.x, p.x) && usable(chart.y, p.y) ? 1 : 0;
  }
  return n;
}

std::string render(const Chart& chart) {
  // The data range, reference lines included (a roof far above the points must still show).
  double xlo = INFINITY, xhi = -INFINITY, ylo = INFINITY, yhi = -INFINITY;
  for (const auto& s : chart.series) {
    for (const auto& p : s.points) {
      if (!usable(chart.x, p.x) || !usable(chart.y, p.y)) continue;
      xlo = std::min(xlo, p.x);
      xhi = std::max(xhi, p.x);
      ylo = std::min(ylo, p.y);
      yhi = std::max(yhi, p.y);
    }
  }
  for (const auto& r : chart.lines) {
    if (!usable(chart.y, r.y)) continue;
    ylo = std::min(ylo, r.y);
    yhi = std::max(yhi, r.y);
  }
  if (!std::isfinite(xlo)) xlo = xhi = chart.x.scale == Scale::kLog10 ? 1 : 0;
  if (!std::isfinite(ylo)) ylo = yhi = chart.y.scale == Scale::kLog10 ? 1 : 0;
  const std::vector<Tick> xt = ticks(chart.x, xlo, xhi);
  const std::vector<Tick> yt = ticks(chart.y, ylo, yhi);
  // Room on the left for the longest y tick label, so that it never runs into the y title; the
  // same for every label up to "700 TFLOP/s", so that charts one above the other line up.
  size_t longest = 0;
  for (const auto& t : yt) longest = std::max(longest, t.label.size());
  const double left = std::max(152.0, kTitleW + 14 + kCharW * longest);

  // The legend: entries side by side, wrapping to a new row when the width runs out.
  struct Placed {
    const LegendEntry* e;
    double x, y;
  };
  std::vector<Placed> legend;
  double lx = left, ly = 24;
  for (const auto& e : chart.legend) {
    const double w = 24 + 8 + kCharW * e.label.size() + 28;
    if (lx + w > kWidth - kRight && lx > left) {
      lx = left;
      ly += kLegendRow;
    }
    legend.push_back({&e, lx, ly});
    lx += w;
  }
  const double top = (chart.legend.empty() ? 16 : ly + 22);
  const double bottom = chart.height - kBottom;
  Mapping mx{xlo, xhi, left, kWidth - kRight, chart.x.scale == Scale::kLog10};
  Mapping my{ylo, yhi, bottom, top, chart.y.scale == Scale::kLog10};

  const int n = point_count(chart);
  std::string o;
  o += "<svg class=\"plot\" data-plot=\"" + xml_escape(chart.name) + "\" data-points=\"" +
       std::to_string(n) + "\" viewBox=\"0 0 " + fmt(kWidth) + " " + fmt(chart.height) +
       "\" role=\"img\">\n";
  o += "<title>" + xml_escape(chart.description) + "</title>\n";

  // Grid and tick labels.
  o += "<g class=\"grid\">\n";
  for (const auto& t : yt) {
    const double y = my(t.value);
    o += "<path d=\"M" + fmt(left) + " " + fmt(y) + " H" + fmt(kWidth - kRight) + "\"/>\n";
  }
  for (const auto& t : xt) {
    const double x = mx(t.value);
    o += "<path d=\"M" + fmt(x) + " " + fmt(top) + " V" + fmt(bottom) + "\"/>\n";
  }
  o += "</g>\n<g class=\"ticks\">\n";
  for (const auto& t : yt) {
    o += "<text class=\"ytick\" x=\"" + fmt(left - 10) + "\" y=\"" + fmt(my(t.value) + 5) + "\">" +
         xml_escape(t.label) + "</text>\n";
  }
  for (const auto& t : xt) {
    o += "<text class=\"xtick\" x=\"" + fmt(mx(t.value)) + "\" y=\"" + fmt(bottom + 24) + "\">" +
         xml_escape(t.label) + "</text>\n";
  }
  o += "</g>\n";
  o += "<path class=\"frame\" d=\"M" + fmt(left) + " " + fmt(top) + " V" + fmt(bottom) + " H" +
       fmt(kWidth - kRight) + "\"/>\n";
  o += "<text class=\"xtitle\" x=\"" + fmt((left + kWidth - kRight) / 2) + "\" y=\"" +
       fmt(chart.height - 16) + "\">" + xml_escape(chart.x.title) + "</text>\n";
  o += "<text class=\"ytitle\" transform=\"translate(22 " + fmt((top + bottom) / 2) +
       ") rotate(-90)\">" + xml_escape(chart.y.title) + "</text>\n";

  // Reference lines under the data.
  for (const auto& r : chart.lines) {
    if (!usable(chart.y, r.y)) continue;
    const double y = my(r.y);
    o += "<g class=\"" + xml_escape(r.css_class) + "\"><path class=\"ref\" d=\"M" + fmt(left) +
         " " + fmt(y) + " H" + fmt(kWidth - kRight) + "\"/><text class=\"reflabel\" x=\"" +
         fmt(kWidth - kRight - 6) + "\" y=\"" + fmt(y - 7) + "\">" + xml_escape(r.label) +
         "</text></g>\n";
  }
  // Lines first, then the points over them.
  for (const auto& s : chart.series) {
    if (!s.step_line) continue;
    std::vector<Point> pts;
    for (const auto& p : s.points)
      if (usable(chart.x, p.x) && usable(chart.y, p.y)) pts.push_back(p);
    if (pts.empty()) continue;
    std::stable_sort(pts.begin(), pts.end(),
                     [](const Point& a, const Point& b) { return a.x < b.x; });
    std::string d = "M" + fmt(mx(pts[0].x)) + " " + fmt(my(pts[0].y));
    for (size_t i = 1; i < pts.size(); ++i)
      d += " H" + fmt(mx(pts[i].x)) + " V" + fmt(my(pts[i].y));
    o +=
        "<g class=\"" + xml_escape(s.css_class) + "\"><path class=\"line\" d=\"" + d + "\"/></g>\n";
  }
  for (const auto& s : chart.series) {
    if (!s.dots) continue;
    o += "<g class=\"" + xml_escape(s.css_class) + "\">\n";
    for (const auto& p : s.points) {
      if (!usable(chart.x, p.x) || !usable(chart.y, p.y)) continue;
      const bool big = p.css_class.find("kept") != std::string::npos;
      o += "<circle class=\"pt" + (p.css_class.empty() ? "" : " " + xml_escape(p.css_class)) +
           "\" cx=\"" + fmt(mx(p.x)) + "\" cy=\"" + fmt(my(p.y)) + "\" r=\"" + (big ? "7" : "5") +
           "\"><title>" + xml_escape(p.tooltip) + "</title></circle>\n";
    }
    o += "</g>\n";
  }
  // The legend last, so nothing is drawn over it.
  if (!legend.empty()) {
    o += "<g class=\"legend\">\n";
    for (const auto& p : legend) {
      o += shape_swatch(*p.e, p.x, p.y - 5);
      o += "<text x=\"" + fmt(p.x + 32) + "\" y=\"" + fmt(p.y) + "\">" + xml_escape(p.e->label) +
           "</text>\n";
    }
    o += "</g>\n";
  }
  o += "</svg>\n";
  return o;
}

}  // namespace kiln::report::svg
