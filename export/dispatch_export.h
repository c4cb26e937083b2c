// A dispatch table export (`kiln export` of a target a run swept over shapes): every best of the
// sweep (one per shape and GPU model) is compiled into its own translation unit under its own
// namespace and kernel symbol, and one launcher picks among them at run time by the shape it is
// called with and the GPU it runs on: the nearest searched shape (the sum over dims of |log2| of
// the ratio) among this GPU model's entries whose configuration can run the shape, else among
// every model's, so a shape the sweep never saw still runs. cuda: <t>.cuh/<t>.cu plus
// <t>_v<k>.cuh/.cu per entry; cpu: the same with .h/.cc. dispatch.json lists the table.
#pragma once

#include <string>
#include <vector>

#include "export/source_export.h"

namespace kiln::exporter {

// The files of the dispatch export of `entries` (the same target, backend and dtype; at least one).
// INVALID_ARGUMENT when they do not agree.
Result<std::vector<ExportFile>> dispatch_export(std::vector<ExportCandidate> entries,
                                                const std::string& header_note);

// The table as JSON: per entry its GPU model, shape, configuration, time, candidate id and variant.
nlohmann::json dispatch_table_json(const std::vector<ExportCandidate>& entries);

}  // namespace kiln::exporter
