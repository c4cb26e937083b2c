// `kiln report`: a run's report, read from its output folder, as a self-contained HTML page with
// charts (the default) or as markdown for a terminal. docs/report.md.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

namespace kiln::cli {

void add_report_command(CLI::App& app, std::function<int()>& action);

}  // namespace kiln::cli
