// The Python side of an export, on top of the C++ launcher (source_export.h):
//   torch       a package folder: <target>.py loads the .cu/.cuh (or .cc/.h for cpu kernels) with
//               torch.utils.cpp_extension and exposes one function taking and returning tensors in
//               the target's argument order, checking dtypes, shapes, devices and contiguity and
//               launching on the current stream;
//   gpumode     one submission file for a GPU MODE leaderboard task (CUDA source inline,
//               custom_kernel(data), the #!POPCORN lines), for targets that declare the task;
//   kernelbench one file with a KernelBench ModelNew (CUDA source inline).
#pragma once

#include <string>
#include <vector>

#include "export/source_export.h"

namespace kiln::exporter {

// The torch package's files.
Result<std::vector<ExportFile>> torch_export(const ExportCandidate& c,
                                             const std::string& header_note);

// The GPU MODE submission; FAILED_PRECONDITION for a target that is not a leaderboard task, or
// whose task's checker needs bit-exact agreement with a vendor library.
Result<std::vector<ExportFile>> gpumode_export(const ExportCandidate& c,
                                               const std::string& header_note);

// The KernelBench ModelNew file.
Result<std::vector<ExportFile>> kernelbench_export(const ExportCandidate& c,
                                                   const std::string& header_note);

// The Python name of `dtype` ("torch.float16").
std::string torch_dtype(DType dtype);

}  // namespace kiln::exporter
