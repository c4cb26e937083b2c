// The reference of bench/import_triton_demo/my_kernels.py's scale_rows, in fp64: y = x * w * alpha
// over the rows of x (M x N), w of length N. What a user writes into the skeleton that
// `kiln import-triton` leaves (docs/import-triton.md).
#include <cstdint>

extern "C" void kiln_reference(const double* const* in, double* const* out, const int64_t* dims,
                               const double* scalars) {
  const int64_t M = dims[0], N = dims[1];
  const double alpha = scalars[0];
  for (int64_t r = 0; r < M; ++r) {
    for (int64_t c = 0; c < N; ++c) out[0][r * N + c] = in[0][r * N + c] * in[1][c] * alpha;
  }
}
