// What the triton backend's compile produces and its launch needs: the cubin plus the metadata
// Triton decided (entry point, dynamic shared memory, warps, the hidden trailing parameters it
// added), packed into the one `binary` string that the compile cache stores and the sandbox
// child loads.
#pragma once

#include <string>

#include "shared/status.h"

namespace kiln::eval {

struct TritonKernel {
  std::string cubin;
  std::string name;            // the cubin's entry point
  unsigned shared_bytes = 0;   // dynamic shared memory the launch must give it
  unsigned num_warps = 4;      // threads per program = 32 * num_warps
  unsigned hidden_args = 0;    // trailing pointer parameters (Triton's scratch), passed as null
  std::string triton_version;  // the compiling side's, checked against the launching side's
};

// "kiln-triton-cubin 1\n" + one line of JSON metadata + "\n" + the cubin's bytes.
std::string encode_triton_binary(const TritonKernel& k);
// Whether `binary` starts like encode_triton_binary's output.
bool is_triton_binary(const std::string& binary);
// INVALID_ARGUMENT saying what is wrong when `binary` is not a whole encoding.
Result<TritonKernel> decode_triton_binary(const std::string& binary);

}  // namespace kiln::eval
