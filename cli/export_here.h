// What `kiln export` does with a candidate on this machine before it writes anything, for the
// single-kernel export (export_cmd.cc) and the dispatch table (export_dispatch.cc): the --dtype
// asked for, checked against the backend, and the verification here that goes into the record.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "evaluator/evaluation.h"
#include "export/candidate.h"

namespace kiln::cli {

// The candidate as the evaluator takes it: its kernel text, entry point, parameters and the launch
// geometry of its seed or template, under `label`.
eval::CandidateSpec candidate_spec(const exporter::ExportCandidate& c, const std::string& label);

// The dtype `text` names, if the candidate's backend kernels support it; INVALID_ARGUMENT saying
// so otherwise.
Result<DType> export_dtype(const exporter::ExportCandidate& c, const std::string& text);

// The candidate verified here: five stages at every shape the target lists, then the timing (at
// `shape` when given, else the benchmark shape).
struct HereCheck {
  nlohmann::json record;  // the record's summary of it, with device, arch and tools
  std::string failure;    // "" when it verified, else the outcome and every failed stage
};
// An error when the evaluation could not run at all (its message, without context).
Result<HereCheck> verify_here(const exporter::ExportCandidate& c, int gpu,
                              std::optional<Shape> shape, const eval::ProgressFn& progress);

}  // namespace kiln::cli
