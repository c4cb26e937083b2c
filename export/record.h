// The verification record an export carries (kiln-export.json) and the folder layout that lets
// `kiln verify` re-run it anywhere:
//   <files of the format>      the export itself
//   kernel/<kernel file>       the kernel text as evaluated (no prelude), and its parameters in
//                              the record
//   target/                    a copy of the target's folder (spec, reference, kernels)
//   kiln-export.json           candidate id, source hash, parameters, dtype, GPU model, every
//                              stage's verdict and worst error, timing with its clock record,
//                              toolchain versions, kiln's version, and each file's sha256
//   kernel/v<k>/<kernel file>  a dispatch table's entries: each one's kernel text; the record's
//                              "entries" hold each one's candidate, parameters, shape, GPU model,
//                              the search's timing at that shape and its verification here
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "export/candidate.h"
#include "export/source_export.h"

namespace kiln::exporter {

inline constexpr const char* kRecordFile = "kiln-export.json";

// The parts of an evaluation result (result_to_json) a record keeps: outcome, evaluator, GPU
// model, arch, stages (name, passed, cases, worst error, detail), timing (median, IQR, min,
// noise, samples, SM clock, throttled samples) and the fraction of the floor.
nlohmann::json evaluation_summary(const nlohmann::json& result);

// OK when `dir` may receive an export: it does not exist, is empty, or holds an earlier kiln export
// (which write_export replaces); FAILED_PRECONDITION otherwise -- kiln never writes over a folder
// of other files (a project's own target/, say).
Status check_export_folder(const std::string& dir);

// Writes the export into `dir` (check_export_folder first; an earlier export there is removed):
// `files`, kernel/, target/ and the record. `verified_here` is the summary of the evaluation run
// on this machine before writing, or {"skipped": why}. A dispatch table passes its `entries` (c is
// the first) and verified_here {"entries": [one summary per entry]}.
Status write_export(const std::string& dir, const ExportCandidate& c, const std::string& format,
                    const std::vector<ExportFile>& files, const nlohmann::json& verified_here,
                    const std::vector<ExportCandidate>& entries = {});

// An export folder as `kiln verify` reads it back: the record, the candidate (target loaded from
// target/, kernel text from kernel/, both checked against the record's hashes), and the files
// whose text differs from what was exported. A dispatch table's entries come with their shapes.
struct ExportFolder {
  nlohmann::json record;
  ExportCandidate candidate;
  std::vector<ExportCandidate> entries;  // empty for one kernel
  std::vector<std::string> changed_files;
};
Result<ExportFolder> read_export(const std::string& dir);

// The comment block at the top of every exported file: what it is, where it came from, how to
// re-check it.
std::string header_note(const ExportCandidate& c, const std::string& format);

}  // namespace kiln::exporter
