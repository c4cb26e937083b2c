// Tensor maps in an exported cuda launcher (docs/targets.md, "Tensor maps"): the launcher encodes
// each map the configuration takes over the caller's tensor, with the box, swizzle and element
// type kiln verified, and passes it after the scalars, as kiln's sandbox does. The driver's
// cuTensorMapEncodeTiled is reached through the runtime (cudaGetDriverEntryPointByVersion), so
// nothing links libcuda.
#pragma once

#include <string>
#include <vector>

#include "export/candidate.h"
#include "export/expr_cpp.h"

namespace kiln::exporter {

struct TensorMapCode {
  std::string helpers;            // file-scope definitions (the encode entry point); "" if none
  std::string encode;             // statements for launch(): declare and encode every map
  std::vector<std::string> args;  // the maps' variable names, in parameter order
};

// The code for the maps `c` takes with its parameters (none: all fields empty). `names` maps the
// expressions' variables to C++ (dims as d_<dim>); the statements return cudaErrorInvalidValue
// with *why set when a map cannot be encoded at the launch's shape.
Result<TensorMapCode> tensor_map_code(const ExportCandidate& c, const CppNames& names);

}  // namespace kiln::exporter
