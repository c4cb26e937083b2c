// `kiln export` of a target that a run swept over shapes: the dispatch table export
// (export/dispatch_export.h) of every best of the sweep, each verified here at its own shape
// before anything is written. docs/export.md "Dispatch tables".
#pragma once

#include <string>
#include <vector>

#include "export/candidate.h"

namespace kiln::cli {

struct DispatchExportArgs {
  std::string format;  // "" (the backend's C++ format), "cuda" or "cpp"
  std::string dtype;   // "" or another dtype of the backend
  std::string to;      // "" for ./<target>-<format>
  bool no_verify = false;
  int gpu = 0;
};

// Writes the export; the exit code (0 written, 1 an entry did not verify or the folder could not
// be written, 2 bad arguments).
int run_dispatch_export(const DispatchExportArgs& a,
                        std::vector<exporter::ExportCandidate> entries);

}  // namespace kiln::cli
