// The run's record in Redis (kiln:run): what a resume must match (targets and their spec hashes,
// backend, toolchain, islands, GPU models), the options the run was started with, and how far it
// got (the time spent, "running" or "finished", how many coordinator processes worked on it).
// The engine writes it when a run begins or resumes and updates it as the run goes on; `kiln run
// --resume` reads it to take the options that were not given again.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "shared/redis_store.h"
#include "shared/status.h"

namespace kiln::coordinator {

struct RunRecord {
  std::string id;                                  // names its search log, kiln:events:{id}
  std::vector<std::string> targets;                // in the order given
  std::map<std::string, std::string> spec_hashes;  // by target
  std::string backend;
  std::vector<std::string> gpu_models;  // as searched so far ("" for any)
  // A shape sweep's shapes by target (shape_string each, in the sweep's order); a target absent
  // is searched at its benchmark shape. Stored only when the run has a sweep.
  std::map<std::string, std::vector<std::string>> shapes;
  std::string toolchain;
  uint64_t seed = 1;
  uint32_t islands = 2;
  uint32_t capacity = 8;
  uint64_t patience = 64;
  int64_t budget_s = 0;  // the whole run's budget; 0: none
  double spent_s = 0;    // search time spent so far, over every coordinator process of the run
  std::string state;     // "running" or "finished"
  uint32_t starts = 0;   // coordinator processes that worked on it (1 + resumes)
};

// The run recorded in kiln:run; nullopt when the database holds none. DATA_LOSS when a field
// does not parse.
Result<std::optional<RunRecord>> read_run_record(redis::Store& store);

// Writes every field of `record` to kiln:run.
Status write_run_record(redis::Store& store, const RunRecord& record);
// Writes only how far the run got (spent_s, state).
Status write_run_progress(redis::Store& store, const RunRecord& record);
// Writes only the GPU models searched so far.
Status write_run_gpu_models(redis::Store& store, const RunRecord& record);

// "run-17 (reduce,rmsnorm on cpu, running)": a run as the errors about it name it.
std::string run_summary(const RunRecord& record);

// Whether `recorded` is the run that `ours` (the targets, spec hashes, backend, toolchain, islands,
// capacity, shapes and GPU models of the engine about to resume it) would continue: OK, or
// FAILED_PRECONDITION naming the first difference and what to do. A sweep may add shapes to the
// recorded one's targets, not drop or change any. `compare_gpu_models` false: the models are
// discovered as evaluators connect, so any recorded set is fine.
Status check_same_run(const RunRecord& recorded, const RunRecord& ours, bool compare_gpu_models);

}  // namespace kiln::coordinator
