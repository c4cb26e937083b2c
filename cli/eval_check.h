// `kiln eval --check`: the static scan and the compiles of one candidate in every dtype of its
// backend, and its launch geometry at the timed shape, without running anything: no sandbox, no
// GPU (NVRTC compiles for a named architecture on a machine without one).
#pragma once

#include <string>

#include "cli/eval_candidate.h"
#include "evaluator/backend.h"
#include "shared/target_spec.h"

namespace kiln::cli {

struct CheckArgs {
  const TargetSpec* target = nullptr;
  const BackendSpec* backend_spec = nullptr;
  std::string backend;  // "cuda" or "cpu"
  std::string arch;     // what the compiles are for: "sm_90a", ...; "cpu"
  const CandidateChoice* choice = nullptr;
  Shape shape;  // the timed shape (geometry is shown there)
  DType dtype = DType::kF16;
  bool json = false;  // one JSON object on stdout instead of the text report
};

// Prints the report; returns 0 when the scan found nothing, the geometry evaluates within the
// launch limits and every dtype compiled, else 1. A source with scan findings is not compiled.
int run_eval_check(const CheckArgs& args, eval::Compiler& compiler);

}  // namespace kiln::cli
