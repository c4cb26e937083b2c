// The HTML report of a run: one self-contained file (inline style sheet and SVG charts, no
// script, no link to anything outside it) that any browser opens from disk. What it shows and how
// each figure is computed: docs/report.md.
#pragma once

#include <string>

#include "report/run_data.h"

namespace kiln::report {

std::string render_html(const RunData& run);

}  // namespace kiln::report
