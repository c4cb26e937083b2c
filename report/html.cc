// The HTML report (see html.h). Every piece of text that comes from the run (target names, model
// names, failure messages, parameters) goes through xml_escape: a failure message is whatever a
// compiler or a kernel printed, and must not become markup.
#include "report/html.h"

#include <cmath>
#include <string>
#include <vector>

#include "report/analysis.h"
#include "report/charts.h"
#include "report/format.h"
#include "report/sweep_table.h"
#include "shared/build_info.h"

namespace kiln::report {
namespace {

// Sizes are chosen for a column of up to 1200 px: the charts' 1200-unit viewBox is drawn at
// about 1:1 there, and at 1280 px of window (1200 px of column less padding) their 14-15 px
// text stays above 12 px.
constexpr const char* kStyle = R"css(
:root { color-scheme: light; }
* { box-sizing: border-box; }
body { margin: 0; background: #f6f6f4; color: #1d1d1f;
  font: 16px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif; }
main { max-width: 1200px; margin: 0 auto; padding: 16px 24px 48px; background: #fff; }
h1 { font-size: 28px; margin: 8px 0 4px; }
h2 { font-size: 22px; margin: 40px 0 8px; padding-top: 12px; border-top: 2px solid #ddd; }
h3 { font-size: 18px; margin: 28px 0 4px; }
p { margin: 6px 0; }
p.note { color: #555; }
code, pre { font-family: ui-monospace, "DejaVu Sans Mono", Menlo, Consolas, monospace;
  font-size: 14px; }
pre { background: #f2f2ef; border: 1px solid #e2e2de; border-radius: 4px; padding: 8px 12px;
  white-space: pre-wrap; overflow-wrap: anywhere; }
dl.meta { display: grid; grid-template-columns: max-content 1fr; gap: 2px 16px; margin: 8px 0; }
dl.meta dt { color: #555; }
dl.meta dd { margin: 0; overflow-wrap: anywhere; }
.scroll { overflow-x: auto; }
table { border-collapse: collapse; margin: 8px 0; font-size: 15px; }
th, td { padding: 4px 12px 4px 0; text-align: left; vertical-align: top;
  border-bottom: 1px solid #e6e6e6; }
th { border-bottom: 2px solid #ccc; font-weight: 600; }
td.n, th.n { text-align: right; font-variant-numeric: tabular-nums; }
td.text { max-width: 640px; overflow-wrap: anywhere; }
footer { margin-top: 48px; color: #666; font-size: 14px; }
svg.plot { display: block; width: 100%; height: auto; max-width: 1200px; margin: 6px 0; }
svg.plot text { font-size: 15px; fill: #333; }
svg.plot .ytick { text-anchor: end; }
svg.plot .xtick { text-anchor: middle; }
svg.plot .xtitle, svg.plot .ytitle { text-anchor: middle; font-size: 16px; font-weight: 600; }
svg.plot .reflabel { text-anchor: end; font-weight: 600; }
svg.plot .grid path { stroke: #e8e8e8; stroke-width: 1; }
svg.plot .frame { stroke: #999; fill: none; }
svg.plot .line { fill: none; stroke-width: 2.5; }
svg.plot .ref { fill: none; stroke-width: 2; stroke-dasharray: 9 6; }
svg.plot .roof .ref { stroke: #b2182b; } svg.plot .roof text { fill: #b2182b; }
svg.plot .floor .ref { stroke: #1b7837; } svg.plot .floor text { fill: #1b7837; }
svg.plot .best .line { stroke: #d55e00; } svg.plot .best .swatch { fill: #d55e00; }
svg.plot .pt, svg.plot .swatch { stroke: #fff; stroke-width: 1; fill-opacity: 0.85; }
svg.plot .c0 .pt, svg.plot .c0 .swatch { fill: #0072b2; } svg.plot .c0 .line { stroke: #0072b2; }
svg.plot .c1 .pt, svg.plot .c1 .swatch { fill: #009e73; } svg.plot .c1 .line { stroke: #009e73; }
svg.plot .c2 .pt, svg.plot .c2 .swatch { fill: #e69f00; } svg.plot .c2 .line { stroke: #e69f00; }
svg.plot .c3 .pt, svg.plot .c3 .swatch { fill: #cc79a7; } svg.plot .c3 .line { stroke: #cc79a7; }
svg.plot .c4 .pt, svg.plot .c4 .swatch { fill: #56b4e9; } svg.plot .c4 .line { stroke: #56b4e9; }
svg.plot .c5 .pt, svg.plot .c5 .swatch { fill: #d55e00; } svg.plot .c5 .line { stroke: #d55e00; }
svg.plot .c6 .pt, svg.plot .c6 .swatch { fill: #6a3d9a; } svg.plot .c6 .line { stroke: #6a3d9a; }
svg.plot .c7 .pt, svg.plot .c7 .swatch { fill: #444; } svg.plot .c7 .line { stroke: #444; }
/* After the colours, so that they win over a series' fill. */
svg.plot .pt.kept, svg.plot .swatch.kept { stroke: #111; stroke-width: 2.5; fill-opacity: 1; }
svg.plot .pt.seed, svg.plot .swatch.seed { fill: #111; }
)css";

std::string esc(std::string_view s) { return xml_escape(s); }

// A table: `cells` are HTML already. A header starting with '#' marks a numeric column
// (right-aligned), one starting with '~' a column of long text that may wrap; the mark is not
// shown.
std::string html_table(const std::vector<std::string>& headers,
                       const std::vector<std::vector<std::string>>& rows) {
  std::string o = "<div class=\"scroll\"><table>\n<thead><tr>";
  std::vector<std::string> td;
  for (const auto& h : headers) {
    const char mark = h.empty() ? ' ' : h[0];
    const std::string cls = mark == '#' ? " class=\"n\"" : mark == '~' ? " class=\"text\"" : "";
    td.push_back("<td" + cls + ">");
    o += "<th" + cls + ">" + (cls.empty() ? h : h.substr(1)) + "</th>";
  }
  o += "</tr></thead>\n<tbody>\n";
  for (const auto& row : rows) {
    o += "<tr>";
    for (size_t i = 0; i < row.size(); ++i)
      o += (i < td.size() ? td[i] : "<td>") + row[i] + "</td>";
    o += "</tr>\n";
  }
  return o + "</tbody></table></div>\n";
}

std::string header(const RunData& run) {
  std::string o = "<header>\n<h1>kiln report" +
                  (run.run_id.empty() ? "" : ": <code>" + esc(run.run_id) + "</code>") +
                  "</h1>\n<dl class=\"meta\">\n";
  auto item = [&](const std::string& k, const std::string& v) {
    o += "<dt>" + k + "</dt><dd>" + (v.empty() ? "unknown" : v) + "</dd>\n";
  };
  item("run id", esc(run.run_id));
  item("backend", esc(run.backend));
  item("state", esc(run.state));
  item("search time", run.spent_s > 0 ? with_unit(run.spent_s, Unit::kSeconds) : "");
  item("source", "<code>" + esc(run.source) + "</code>");
  return o + "</dl>\n</header>\n";
}

std::string summary(const RunData& run) {
  std::vector<std::vector<std::string>> rows;
  for (size_t i = 0; i < run.units.size(); ++i) {
    const UnitSummary& u = run.units[i];
    rows.push_back(
        {"<a href=\"#unit-" + std::to_string(i + 1) + "\">" + esc(unit_label(u)) + "</a>",
         esc(u.state), std::to_string(u.evaluations), std::to_string(u.failures),
         std::to_string(u.accepted), time_us(u.seed_us), time_us(u.best_us),
         u.seed_us > 0 && u.best_us > 0 ? speedup(u.seed_us / u.best_us) : "-",
         percent(u.fraction_of_floor)});
  }
  return "<section>\n<h2>Summary</h2>\n" +
         html_table({"target @ GPU model", "state", "#evaluations", "#failures", "#kept",
                     "#seed time", "#best time", "#speedup", "#fraction of floor"},
                    rows) +
         "<p class=\"note\">Speedup is the seed's median time over the best's; the fraction of "
         "the floor is the physical floor's time (bytes over peak bandwidth or flops over peak "
         "flop rate, whichever is longer) over the best's time.</p>\n</section>\n";
}

std::string chart_block(const std::string& title, const std::string& caption,
                        const svg::Chart& chart) {
  return "<h3>" + title + "</h3>\n<p class=\"note\">" + caption + "</p>\n" + svg::render(chart);
}

std::string lineage_block(const UnitSummary& u, const std::vector<const ResultRow*>& rows) {
  const Lineage l = lineage_of(u, rows);
  std::string o = "<h3>Lineage of the best</h3>\n";
  if (l.steps.empty()) return o + "<p>No lineage: " + esc(l.note) + ".</p>\n";
  std::vector<std::vector<std::string>> cells;
  for (size_t i = 0; i < l.steps.size(); ++i) {
    const LineageStep& s = l.steps[i];
    std::string gain = "-";
    if (s.gain > 0)
      gain = speedup(s.gain) + " (" + number(100 * (1 - 1 / s.gain), 3) + "% less time)";
    cells.push_back({std::to_string(i), "<code>" + esc(s.candidate_id.substr(0, 12)) + "</code>",
                     esc(s.op.empty() ? "-" : s.op), esc(s.model.empty() ? "-" : s.model),
                     time_us(s.median_us), gain});
  }
  o += "<p class=\"note\">From the seed to the best, each candidate made from the one above it; "
       "the gain compares a candidate's last verified time with its parent's.</p>\n";
  o += html_table({"#step", "candidate", "operator", "model", "#time", "#gain vs parent"}, cells);
  if (!l.note.empty()) o += "<p class=\"note\">The chain stops here: " + esc(l.note) + ".</p>\n";
  return o;
}

std::string winner_block(const RunData& run, const UnitSummary& u) {
  std::string o = "<h3>Winning configuration</h3>\n";
  if (u.best_id.empty()) return o + "<p>No best yet.</p>\n";
  o += "<p><strong>" + esc(u.best_label.empty() ? "-" : u.best_label) +
       "</strong>, candidate <code>" + esc(u.best_id.substr(0, 12)) + "</code>, " +
       time_us(u.best_us) + ".</p>\n";
  if (!u.best_params.empty()) {
    std::vector<std::vector<std::string>> cells;
    for (const auto& [k, v] : u.best_params)
      cells.push_back({"<code>" + esc(k) + "</code>", esc(v)});
    o += html_table({"parameter", "value"}, cells);
  }
  o += "<p>Write it out as files to drop into your code (see <code>kiln export "
       "--help</code>):</p>\n<pre>";
  for (const auto& cmd : export_commands(run, u)) o += esc(cmd) + "\n";
  return o + "</pre>\n";
}

std::string failures_block(const std::vector<const ResultRow*>& rows) {
  std::string o = "<h3>Failures by reason</h3>\n";
  const std::vector<FailureGroup> groups = failures_of(rows);
  if (groups.empty()) return o + "<p>Every result verified.</p>\n";
  std::vector<std::vector<std::string>> cells;
  for (const auto& g : groups) {
    cells.push_back(
        {esc(g.outcome), std::to_string(g.count),
         "<code>" + esc(first_line(g.example.empty() ? "-" : g.example, 240)) + "</code>"});
  }
  return o + html_table({"outcome", "#results", "~first example"}, cells);
}

std::string unit_section(const RunData& run, const UnitSummary& u, size_t n) {
  const std::vector<const ResultRow*> rows = rows_of(run, u);
  std::string o = "<section id=\"unit-" + std::to_string(n) + "\">\n<h2>" + esc(unit_label(u)) +
                  "</h2>\n<p>" + esc(unit_sentence(u)) + "</p>\n";
  if (rows.empty()) return o + "<p>No results of this target yet.</p>\n</section>\n";

  if (any_arrival_time(rows)) {
    o += chart_block("Best time against wall time",
                     "Every timed result at the time it arrived; the line is the best so far "
                     "(the seed, then each crowned candidate after its re-time).",
                     time_chart(u, rows));
  } else {
    o += "<h3>Best time against wall time</h3>\n<p>Not shown: the results do not record when "
         "they arrived (a run of an older kiln).</p>\n";
  }
  o += chart_block("Best time against evaluations",
                   "The same results by evaluation number: the 1-based position of the result "
                   "among this target's results, failures included.",
                   evals_chart(u, rows));
  const Roof roof = roof_of(rows);
  o += chart_block("Throughput against the ceiling",
                   std::string("Each timed candidate's achieved ") +
                       (roof.bandwidth ? "bandwidth (bytes moved per second)"
                                       : "compute throughput (flop per second)") +
                       ", the resource that sets this target's physical floor; the dashed line "
                       "is the peak the evaluators measured" +
                       (roof.peak > 0 ? "." : " (not measured in this run, so not drawn)."),
                   roofline_chart(u, rows));
  o += lineage_block(u, rows);
  o += winner_block(run, u);
  o += failures_block(rows);
  return o + "</section>\n";
}

// One section per swept (target, GPU model): the dispatch table and the single configuration.
std::string dispatch_sections(const RunData& run) {
  std::string o;
  for (const SweepTable& t : sweep_tables(run)) {
    std::vector<std::vector<std::string>> cells;
    for (const SweepEntry& e : t.entries) {
      cells.push_back({"<code>" + esc(e.shape) + "</code>", time_us(e.best_us),
                       esc(e.best_label.empty() ? "-" : e.best_label),
                       e.single_us > 0 ? time_us(e.single_us) : "-",
                       e.single_us > 0 && e.best_us > 0 ? speedup(e.single_us / e.best_us) : "-"});
    }
    o += "<section>\n<h2>Dispatch table: " + esc(t.target) +
         (t.gpu_model.empty() ? "" : " @ " + esc(t.gpu_model)) + "</h2>\n" +
         "<p class=\"note\">Each swept shape's best, as <code>kiln export</code> writes them into "
         "one launcher that picks by shape, and the time at that shape of the one configuration "
         "that serves them all best.</p>\n" +
         html_table({"shape", "#best", "configuration", "#single configuration", "#single / best"},
                    cells) +
         "<p>" + esc(single_config_sentence(t)) + "</p>\n</section>\n";
  }
  return o;
}

std::string workers_section(const RunData& run) {
  const std::vector<WorkerUse> workers = workers_of(run);
  std::string o = "<section id=\"workers\">\n<h2>Evaluators</h2>\n";
  if (workers.empty())
    return o +
           "<p>The results do not name their evaluators (a run of an older "
           "kiln).</p>\n</section>\n";
  const svg::Chart chart = workers_chart(run);
  if (svg::point_count(chart) > 0) {
    o += chart_block("Evaluations per evaluator over time",
                     "Each evaluator's count of results against the time they arrived: a flat "
                     "stretch is an evaluator that delivered nothing then.",
                     chart);
  } else {
    o += "<p>No chart over time: the results do not record when they arrived.</p>\n";
  }
  std::vector<std::vector<std::string>> cells;
  for (const auto& w : workers) {
    cells.push_back({"<code>" + esc(w.evaluator) + "</code>", std::to_string(w.evaluations),
                     with_unit(w.busy_s, Unit::kSeconds),
                     w.idle_s >= 0 ? with_unit(w.idle_s, Unit::kSeconds) : "-"});
  }
  o += html_table({"evaluator", "#evaluations", "#busy", "#idle"}, cells);
  o += "<p class=\"note\">Busy time is the sum of the evaluator's wall times for its tasks; idle "
       "time is the run's span (its search time, or the last result's arrival when that is not "
       "recorded) less the busy time, and never below zero.</p>\n";
  return o + "</section>\n";
}

std::string llm_section(const RunData& run) {
  std::vector<std::vector<std::string>> cells;
  for (const auto& m : run.llm) {
    cells.push_back({esc(m.model), std::to_string(m.calls), std::to_string(m.input_tokens),
                     std::to_string(m.output_tokens), dollars(m.cost_usd),
                     std::to_string(m.accepted),
                     m.accepted > 0 ? dollars(m.cost_usd / m.accepted) : "-"});
  }
  return "<section id=\"llm\">\n<h2>LLM models</h2>\n" +
         html_table({"model", "#calls", "#input tokens", "#output tokens", "#cost", "#accepted",
                     "#cost per accepted"},
                    cells) +
         "<p class=\"note\">Accepted counts the children a model wrote that the search kept.</p>\n"
         "</section>\n";
}

}  // namespace

std::string render_html(const RunData& run) {
  std::string o =
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>kiln "
      "report" +
      (run.run_id.empty() ? "" : " " + esc(run.run_id)) + "</title>\n<style>" + kStyle +
      "</style>\n</head>\n<body>\n<main>\n";
  o += header(run);
  if (run.units.empty() && run.rows.empty()) {
    o += "<section>\n<h2>Nothing yet</h2>\n<p>This run has no targets and no results yet: "
         "nothing to report. Run the report again once evaluations have come in.</p>\n"
         "</section>\n";
  } else {
    o += summary(run);
    o += dispatch_sections(run);
    for (size_t i = 0; i < run.units.size(); ++i) o += unit_section(run, run.units[i], i + 1);
    o += workers_section(run);
    if (!run.llm.empty()) o += llm_section(run);
  }
  o += "<footer>Written by kiln " KILN_VERSION " (" KILN_GIT_COMMIT
       ") from the results above; no script and no outside resource.</footer>\n";
  return o + "</main>\n</body>\n</html>\n";
}

}  // namespace kiln::report
