// `kiln report --redis URL`: a run read from its Redis instead of its output folder, while it
// runs or after (docs/report.md). The results, their lineage and arrival times come from the
// run's search log (kiln:events:{run}), the standings from kiln:target:*, the run from kiln:run.
#pragma once

#include <string>

#include "report/run_data.h"
#include "shared/redis_store.h"

namespace kiln::cli {

// NOT_FOUND when the database holds no run; DATA_LOSS naming the entry when the log is corrupt.
// `source` is how the report names where it was read (the URL without credentials).
Result<report::RunData> load_run_redis(redis::Store& store, const std::string& source);

}  // namespace kiln::cli
