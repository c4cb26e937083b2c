// What `kiln run` and `kiln coordinator` settle before their search starts (run_cmd.cc runs it):
// the options checked, with --config's values; the targets named; where the evaluators run; the
// engine's options, with a shape sweep and a profile plan's weights; and the command that resumes
// the run. Errors are messages without the command's name (the caller adds it).
#pragma once

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "cli/run_args.h"
#include "coordinator/engine.h"
#include "coordinator/run_record.h"
#include "shared/config.h"
#include "shared/status.h"
#include "shared/target_spec.h"

namespace kiln::cli {

// The options, checked before anything starts (the output folder, a private redis-server): a bad
// value found later would abort the search or leave them behind.
struct CheckedRunArgs {
  RunArgs args;                // with --config's values for what the command line leaves out
  SearchConfig search_config;  // --config's search knobs (selection, migration, convergence)
  std::chrono::seconds budget{0};
  std::vector<int> gpus;  // --gpus
  bool http_on = false;   // --http names an address
};
Result<CheckedRunArgs> check_run_args(const RunArgs& args);

// The targets `names` (folders, or names looked up in `dirs`), loaded.
Result<std::vector<TargetSpec>> load_named_targets(const std::string& dirs,
                                                   const std::vector<std::string>& names);

// The command that continues the run in `out`: every option the run's record does not keep, so
// that it works when pasted.
std::string run_resume_hint(const RunArgs& a, const std::string& out);

// Where the search's kernels run.
struct RunPlacement {
  std::string backend;
  std::vector<int> gpus;                // the local evaluators' GPUs (GPU backends)
  std::vector<std::string> gpu_models;  // a population per model; {""}: one for all
  bool discover_models = false;         // a coordinator's: the models of those that connect
};
// `backend` is the asked or recorded one ("" to choose: cuda where a usable GPU is, else cpu with
// a notice); `gpus` the asked ones (none: every visible GPU); `resuming` a recorded run's.
Result<RunPlacement> place_run(const RunArgs& a, std::string backend, std::vector<int> gpus,
                               bool resuming);

// The targets with kernels for `backend`; each other one is named on stderr as skipped.
std::vector<TargetSpec> runnable_targets(std::vector<TargetSpec> targets,
                                         const std::string& backend);

// What the engine is given beyond the run's options.
struct EngineSettings {
  RunPlacement placement;
  std::chrono::seconds budget{0};
  uint64_t seed = 0;
  uint32_t islands = 0;
  uint64_t patience = 0;
  size_t local_evaluators = 0;   // started by this process (0 for a coordinator)
  std::string triton_toolchain;  // Triton's version and kiln's worker, on a triton run
  const coordinator::RunRecord* resumed = nullptr;  // the recorded run a resume continues
};
// The engine's options, with the --shapes sweep (or a resume's recorded shapes) and the --plan
// weights; what they are is said on stderr, `who` first.
Result<coordinator::EngineOptions> engine_options(const CheckedRunArgs& run,
                                                  const EngineSettings& settings,
                                                  const std::vector<TargetSpec>& runnable,
                                                  const char* who);

}  // namespace kiln::cli
