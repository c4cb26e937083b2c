// Reads a `kiln run --out` folder into RunData: summary.json (every target's standing),
// best/*.json (the best's parameters), results.jsonl (every result, one JSON object per line),
// and when present run.json (run id, backend, state, search time) and llm-usage.json (the LLM
// models' calls, tokens and cost). Folders of older kilns lack some fields of results.jsonl
// (arrival time, parent, operator, model, evaluator); the report says what it cannot show then.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "report/run_data.h"
#include "shared/status.h"

namespace kiln::report {

// NOT_FOUND when `dir` is not a run folder (no summary.json or results.jsonl), saying what to
// pass; DATA_LOSS naming the file (and for results.jsonl the line) that does not parse.
Result<RunData> load_run_folder(const std::string& dir);

// One line of results.jsonl (eval::result_to_json of a result, with what the search made of it:
// target, gpu_model, params, kind, verdict, parent, op, model, at_s) as a row. The Redis loader
// builds the same object from the run's search log.
ResultRow result_row_from_json(const nlohmann::json& row);

}  // namespace kiln::report
