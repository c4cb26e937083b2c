// `kiln eval <target> --sweep`: every configuration of a target's template (or a random sample of
// them) evaluated in one process -- one sandbox, compiles of the next configurations overlapping
// the device work of the current one -- then a table sorted by time and the evaluation rate.
#pragma once

#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "evaluator/evaluation.h"
#include "shared/target_spec.h"

namespace kiln::cli {

// All parameter assignments of `spec.space` that satisfy its constraints at `shape`, in a fixed
// order; at most `limit` of them (a seeded random sample) when limit > 0.
std::vector<std::map<std::string, std::string>> template_configs(const KernelSpec& spec,
                                                                 const Shape& shape, DType dtype,
                                                                 uint32_t limit, uint64_t seed);

// "BLOCK=256,VEC=8": parameter values as kiln prints them and hashes them into candidate ids.
std::string format_params(const std::map<std::string, std::string>& params);

struct SweepArgs {
  const TargetSpec* target = nullptr;
  const KernelSpec* spec = nullptr;   // the template
  DType dtype = DType::kF16;
  Shape shape;
  uint32_t limit = 0;
  uint64_t seed = 1;
  uint32_t compile_threads = 4;
  bool json = false;
  // The kernel text swept over the template's configurations: "" = the template's own; else a
  // --source file's text, its entry point and its label.
  std::string source;
  std::string kernel_name;
  std::string label = "template";
};

// Returns 0 when at least one configuration verified.
int run_sweep(const SweepArgs& args, eval::CandidateEvaluator& evaluator, eval::Compiler& compiler,
              FILE* progress);

}  // namespace kiln::cli
