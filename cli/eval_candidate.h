// How `kiln eval` turns its arguments into one candidate: which kernel text (the seed, the
// template or a --source file), whose launch geometry (the seed's or the template's), and which
// parameter values; and, when the template's constraints fail, a message that names each failing
// constraint with the values it saw and the flag that fixes it.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "evaluator/evaluation.h"
#include "shared/status.h"
#include "shared/target_spec.h"

namespace kiln::cli {

struct CandidateArgs {
  std::string source_file;  // "" = the target's own kernel text
  std::string kernel;       // entry point ("" = the chosen spec's)
  std::string geometry;     // "seed", "template" or "" (chosen from the other flags)
  bool use_template = false;
  bool sweep = false;
  std::map<std::string, std::string> params;  // --params
};

struct CandidateChoice {
  eval::CandidateSpec candidate;     // geometry points into the target's BackendSpec
  const KernelSpec* spec = nullptr;  // the seed's or the template's (geometry, space, constraints)
  std::string geometry;              // "seed" or "template"
  std::string params_note;           // how the template parameters were chosen ("" for the seed)
};

// "K=V,K2=V2" (--params, --shape) as a map; INVALID_ARGUMENT naming `what` for an item that is
// not KEY=VALUE.
Result<std::map<std::string, std::string>> parse_pairs(const std::string& text, const char* what);

// Chooses the candidate. The geometry is the template's with --geometry template, --template,
// --params or --sweep, else the seed's (a --source file included: a file derived from the seed
// launches as the seed does). Template parameters not given by --params take the values of the
// first configuration that meets the constraints at `shape` and `dtype` and agrees with the given
// ones (the first value of each when none does). Invalid combinations and failing constraints
// are invalid_argument errors whose message says what to change.
Result<CandidateChoice> choose_candidate(const BackendSpec& b, const CandidateArgs& a,
                                         const Shape& shape, DType dtype);

// Each of `spec`'s constraints that does not hold at shape/dtype/params, as the expression
// followed by the values of its variables: "ROWS > 1 || BLOCK * ELEMS == 8192  (ROWS=1,
// BLOCK=128, ELEMS=8)". Empty when all hold.
std::vector<std::string> failing_constraints(const KernelSpec& spec, const Shape& shape,
                                             DType dtype,
                                             const std::map<std::string, std::string>& params);

// The --json record of what was launched: {"from": "seed"|"template", "shape": {...},
// "grid": [x,y,z], "block": [x,y,z], "shared_bytes": n} at `shape`, or {"from", "shape",
// "error"} when an expression cannot be evaluated there.
nlohmann::json geometry_json(const CandidateChoice& c, const Shape& shape, DType dtype);

}  // namespace kiln::cli
