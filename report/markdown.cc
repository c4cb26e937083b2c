// The markdown report (see markdown.h). Every cell goes through md_cell, so a failure message
// with a pipe or a newline cannot break its table.
#include "report/markdown.h"

#include <string>
#include <vector>

#include "report/analysis.h"
#include "report/format.h"
#include "report/sweep_table.h"

namespace kiln::report {
namespace {

// A GitHub table; a header starting with '#' is a right-aligned (numeric) column.
std::string markdown_table(const std::vector<std::string>& headers,
                           const std::vector<std::vector<std::string>>& rows) {
  std::string head = "|", rule = "|";
  for (const auto& h : headers) {
    const bool n = !h.empty() && h[0] == '#';
    head += " " + (n ? h.substr(1) : h) + " |";
    rule += n ? " ---: |" : " --- |";
  }
  std::string o = head + "\n" + rule + "\n";
  for (const auto& row : rows) {
    o += "|";
    for (const auto& cell : row) o += " " + md_cell(cell) + " |";
    o += "\n";
  }
  return o + "\n";
}

std::string unit_part(const RunData& run, const UnitSummary& u) {
  const std::vector<const ResultRow*> rows = rows_of(run, u);
  std::string o = "## " + unit_label(u) + "\n\n" + unit_sentence(u) + "\n\n";
  if (rows.empty()) return o + "No results of this target yet.\n\n";

  const Lineage l = lineage_of(u, rows);
  o += "### Lineage of the best\n\n";
  if (l.steps.empty()) {
    o += "No lineage: " + l.note + ".\n\n";
  } else {
    std::vector<std::vector<std::string>> cells;
    for (size_t i = 0; i < l.steps.size(); ++i) {
      const LineageStep& s = l.steps[i];
      std::string gain = "-";
      if (s.gain > 0)
        gain = speedup(s.gain) + " (" + number(100 * (1 - 1 / s.gain), 3) + "% less time)";
      cells.push_back({std::to_string(i), s.candidate_id.substr(0, 12), s.op, s.model,
                       time_us(s.median_us), gain});
    }
    o += markdown_table({"#step", "candidate", "operator", "model", "#time", "#gain vs parent"},
                        cells);
    if (!l.note.empty()) o += "The chain stops here: " + l.note + ".\n\n";
  }

  o += "### Winning configuration\n\n";
  if (u.best_id.empty()) {
    o += "No best yet.\n\n";
  } else {
    o += "**" + md_cell(u.best_label) + "**, candidate `" + u.best_id.substr(0, 12) + "`, " +
         time_us(u.best_us) + ". Parameters: " + md_cell(params_text(u.best_params)) +
         ".\n\n```sh\n";
    for (const auto& cmd : export_commands(run, u)) o += cmd + "\n";
    o += "```\n\n";
  }

  o += "### Failures by reason\n\n";
  const std::vector<FailureGroup> groups = failures_of(rows);
  if (groups.empty()) return o + "Every result verified.\n\n";
  std::vector<std::vector<std::string>> cells;
  for (const auto& g : groups)
    cells.push_back({g.outcome, std::to_string(g.count), first_line(g.example, 160)});
  return o + markdown_table({"outcome", "#results", "first example"}, cells);
}

}  // namespace

std::string render_markdown(const RunData& run) {
  std::string o = "# kiln report" + (run.run_id.empty() ? "" : ": " + run.run_id) + "\n\n";
  o += "- backend: " + (run.backend.empty() ? "unknown" : run.backend) + "\n";
  o += "- state: " + (run.state.empty() ? "unknown" : run.state) + "\n";
  o += "- search time: " + (run.spent_s > 0 ? with_unit(run.spent_s, Unit::kSeconds) : "unknown") +
       "\n";
  o += "- source: " + run.source + "\n\n";
  if (run.units.empty() && run.rows.empty())
    return o + "Nothing to report yet: the run has no targets and no results.\n";

  std::vector<std::vector<std::string>> cells;
  for (const auto& u : run.units) {
    cells.push_back({unit_label(u), u.state, std::to_string(u.evaluations),
                     std::to_string(u.failures), std::to_string(u.accepted), time_us(u.seed_us),
                     time_us(u.best_us),
                     u.seed_us > 0 && u.best_us > 0 ? speedup(u.seed_us / u.best_us) : "-",
                     percent(u.fraction_of_floor)});
  }
  o += "## Summary\n\n" +
       markdown_table({"target @ GPU model", "state", "#evals", "#failures", "#kept", "#seed time",
                       "#best time", "#speedup", "#fraction of floor"},
                      cells);
  for (const SweepTable& t : sweep_tables(run)) {
    cells.clear();
    for (const SweepEntry& e : t.entries) {
      cells.push_back({e.shape, time_us(e.best_us), e.best_label.empty() ? "-" : e.best_label,
                       e.single_us > 0 ? time_us(e.single_us) : "-",
                       e.single_us > 0 && e.best_us > 0 ? speedup(e.single_us / e.best_us) : "-"});
    }
    o +=
        "## Dispatch table: " + t.target + (t.gpu_model.empty() ? "" : " @ " + t.gpu_model) +
        "\n\n" +
        markdown_table(
            {"shape", "#best", "configuration", "#single configuration", "#single / best"}, cells) +
        single_config_sentence(t) + "\n\n";
  }
  for (const auto& u : run.units) o += unit_part(run, u);

  const std::vector<WorkerUse> workers = workers_of(run);
  if (!workers.empty()) {
    cells.clear();
    for (const auto& w : workers) {
      cells.push_back({w.evaluator, std::to_string(w.evaluations),
                       with_unit(w.busy_s, Unit::kSeconds),
                       w.idle_s >= 0 ? with_unit(w.idle_s, Unit::kSeconds) : "-"});
    }
    o += "## Evaluators\n\n" +
         markdown_table({"evaluator", "#evaluations", "#busy", "#idle"}, cells) +
         "Busy is the sum of the evaluator's task wall times; idle is the run's span less busy, "
         "never below zero.\n\n";
  }
  if (!run.llm.empty()) {
    cells.clear();
    for (const auto& m : run.llm) {
      cells.push_back({m.model, std::to_string(m.calls), std::to_string(m.input_tokens),
                       std::to_string(m.output_tokens), dollars(m.cost_usd),
                       std::to_string(m.accepted),
                       m.accepted > 0 ? dollars(m.cost_usd / m.accepted) : "-"});
    }
    o += "## LLM models\n\n" + markdown_table({"model", "#calls", "#input tokens", "#output tokens",
                                               "#cost", "#accepted", "#cost per accepted"},
                                              cells);
  }
  return o;
}

}  // namespace kiln::report
