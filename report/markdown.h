// The report of a run as GitHub markdown, for a terminal or a pull request: the summary table,
// per target the best, its lineage, the winning configuration, the export commands and the
// failures by reason, then the evaluators and the LLM models. The same figures as the HTML page
// (analysis.h), without the charts. docs/report.md.
#pragma once

#include <string>

#include "report/run_data.h"

namespace kiln::report {

std::string render_markdown(const RunData& run);

}  // namespace kiln::report
