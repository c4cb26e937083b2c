// The sources of the probes that measure a device's ceilings (evaluator/ceilings.h): compiled at
// run time and timed in the sandbox child exactly as candidates are.
#pragma once

namespace kiln::eval {

// A grid-stride copy of 16-byte vectors (`kiln_copy`): the GPU's copy bandwidth.
extern const char* const kCopyProbeCuda;
// wgmma in a loop over shared-memory tiles (`kiln_mma_probe`, sm_90a): the tensor-core rate.
extern const char* const kMatrixRateProbeCuda;
// kiln's own mma.sync f16 GEMM (sm_80 and later): the rate a good hand-written GEMM attains.
extern const char* const kAttainableGemmCuda;
// An L1-resident copy on one host core (`host_copy_probe`): the cpu backend's copy rate.
extern const char* const kCopyProbeHost;

}  // namespace kiln::eval
