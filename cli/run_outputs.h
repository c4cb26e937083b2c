// What `kiln run` and `kiln coordinator` leave in their output folder: summary.json,
// best/<unit>.json, results.jsonl, run.json, agents.json and llm-usage.json (docs/run.md "The
// output folder").
#pragma once

#include <string>
#include <vector>

#include "coordinator/engine.h"
#include "shared/status.h"
#include "shared/target_spec.h"

namespace kiln::cli {

// Writes (or rewrites) the files of `out` from the engine's state.
Status write_outputs(const std::string& out, const std::vector<TargetSpec>& targets,
                     const std::string& backend, const coordinator::Engine& engine);

}  // namespace kiln::cli
