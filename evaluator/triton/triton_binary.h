// What the triton backend's compile produces and its launch needs: the cubin plus the metadata
// Triton decided (entry point, dynamic shared memory, warps, the hidden trailing parameters it
// added), packed into the one `binary` string that the compile cache stores and the sandbox
// child loads.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "shared/status.h"

namespace kiln::eval {

// The same kernel compiled for arguments that are multiples of 16 (Triton's own launcher
// specializes every pointer and integer argument so): where a mask or an offset depends on such a
// dim, its loads and stores are vectorized. Launched only where each listed argument is one.
struct TritonDivisible {
  std::string cubin;
  std::string name;            // its entry point
  unsigned shared_bytes = 0;   // its dynamic shared memory
  std::vector<unsigned> args;  // the visible parameters (pointers, integers) it assumes divisible
};

struct TritonKernel {
  std::string cubin;
  std::string name;            // the cubin's entry point
  unsigned shared_bytes = 0;   // dynamic shared memory the launch must give it
  unsigned num_warps = 4;      // threads per program = 32 * num_warps
  unsigned hidden_args = 0;    // trailing pointer parameters (Triton's scratch), passed as null
  std::string triton_version;  // the compiling side's; decoding refuses one that is not 3.x
  std::optional<TritonDivisible> divisible;
};

// "kiln-triton-cubin 2\n" + one line of JSON metadata + "\n" + the cubin's bytes, then the
// divisible variant's cubin's bytes (their sizes are in the metadata).
std::string encode_triton_binary(const TritonKernel& k);
// Whether `binary` starts like encode_triton_binary's output.
bool is_triton_binary(const std::string& binary);
// INVALID_ARGUMENT saying what is wrong when `binary` is not a whole encoding.
Result<TritonKernel> decode_triton_binary(const std::string& binary);

}  // namespace kiln::eval
