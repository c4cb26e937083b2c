// open_device: the one place that turns a backend name ("cpu", "cuda", "triton") and a GPU ordinal
// into a Device. Called only in the process that owns the device (the sandbox child).
#pragma once

#include <memory>
#include <string>

#include "evaluator/backend.h"
#include "shared/status.h"

namespace kiln::eval {

// "cpu" -> CpuDevice (its dlopen scratch directory goes under `scratch_dir`; empty: $TMPDIR or
// /tmp); `gpu` is ignored. "cuda" -> CudaDevice on GPU `gpu`, with the driver API loaded at run
// time and owned by the returned object ("triton" too: its kernels are cubins); kUnimplemented when
// this kiln was built without the CUDA backend, kUnavailable when there is no driver or no such
// GPU. Other names are kInvalidArgument.
Result<std::unique_ptr<Device>> open_device(const std::string& backend, int gpu,
                                            const std::string& scratch_dir = "");

}  // namespace kiln::eval
