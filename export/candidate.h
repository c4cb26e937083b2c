// What `kiln export` writes out: one verified kernel with everything needed to launch it outside
// kiln (its text, the parameters baked in, the dtype, the geometry expressions of the seed or the
// template it came from), found in a run's output folder, in a run's Redis, or named directly as
// a target's seed or template configuration.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "shared/dtype.h"
#include "shared/redis_client.h"
#include "shared/status.h"
#include "shared/target_spec.h"

namespace kiln::exporter {

struct ExportCandidate {
  TargetSpec target;
  std::string backend;       // "cuda" or "cpu"
  bool is_template = false;  // launch geometry: the template's (else the seed's)
  std::string source;        // the kernel text as evaluated (no prelude)
  std::string kernel_name;
  std::map<std::string, std::string> params;  // every -D macro of the evaluation
  DType dtype = DType::kF32;
  std::string candidate_id;      // "" when named directly and never evaluated
  std::string gpu_model;         // the population it won in ("" any)
  std::string arch;              // of the evaluation that verified it ("sm_90a", "cpu"; "" unknown)
  nlohmann::json search_result;  // the run's verified result (result_to_json), null if none
  std::string origin;            // where it was found, for the record and messages
  // In a shape sweep: the shape its population was timed at ({} for the benchmark shape) and its
  // time there (us; 0 unknown).
  Shape shape;
  double best_us = 0;
  // One entry of a dispatch table (dispatch_export.h): appended to the export's namespace and to
  // the kernel's symbol, so that several configurations link into one program. "" for none.
  std::string variant;

  const KernelSpec& geometry() const;  // the seed's or the template's
  bool is_cuda() const { return backend == "cuda"; }
};

// Which candidate of a run: a target, optionally a GPU model and a candidate id (a prefix of at
// least 8 hex digits is enough); the default is the target's best.
struct RunSelection {
  std::string target;
  std::string gpu_model;        // "" = the only population of the target, or this machine's GPU
  std::string candidate_id;     // "" = the best
  std::string local_gpu_model;  // this machine's GPU model, to choose between populations
};

// From `kiln run --out DIR`'s folder: best/<target>[@model].json for the best; results.jsonl for
// another candidate id (a template configuration or the seed: kernel texts that agents wrote are
// only in the run's Redis). The target is loaded from `targets_dirs` (shared/target_path.h) and
// must have the spec hash the run recorded.
Result<ExportCandidate> from_run_folder(const std::string& out, const RunSelection& sel,
                                        const std::string& targets_dirs);

// Every best of a shape sweep of `target` in a run's folder (best/<target>-<shape>[@model].json),
// by unit name; empty when the run swept no shapes of it.
Result<std::vector<ExportCandidate>> sweep_bests_from_run_folder(const std::string& out,
                                                                 const std::string& target,
                                                                 const std::string& targets_dirs);

// From a run's Redis (running or finished): kiln:target:{unit} names the best, kiln:cand:{id} its
// source and parameters, kiln:result:{id}:{arch} its verified result.
Result<ExportCandidate> from_redis(redis::RedisClient& client, const RunSelection& sel,
                                   const std::string& targets_dirs);

// The candidate's macros as text ("BLOCK=256 TPR=128"), for messages and the record.
std::string params_text(const std::map<std::string, std::string>& params);

}  // namespace kiln::exporter
