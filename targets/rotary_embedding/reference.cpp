// Trusted reference for rotary_embedding (GPT-NeoX rotate-half), in fp64 on the host. For each
// row (b, h, l) of x[B, H, L, D] and each i < R (D = 2R):
//   y[i]     = x[i] * cos[l, i] - x[i + R] * sin[l, i]
//   y[i + R] = x[i + R] * cos[l, i] + x[i] * sin[l, i]
#include <cstdint>

namespace {

void rotate_row(const double* const* in, double* const* out, const int64_t* dims, int64_t row) {
  const int64_t L = dims[2], D = dims[3], R = dims[4];
  const int64_t l = row % L;
  const double* xr = in[0] + row * D;
  const double* cs = in[1];
  const double* sn = in[2];
  double* yr = out[0] + row * D;
  for (int64_t i = 0; i < R; ++i) {
    const double c = cs[l * R + i], s = sn[l * R + i];
    yr[i] = xr[i] * c - xr[i + R] * s;
    yr[i + R] = xr[i + R] * c + xr[i] * s;
  }
}

}  // namespace

extern "C" void kiln_reference(const double* const* in, double* const* out, const int64_t* dims,
                               const double* /*scalars*/) {
  for (int64_t row = 0; row < dims[0] * dims[1] * dims[2]; ++row) rotate_row(in, out, dims, row);
}

// Rows on demand (target.json's reference_rows is B, H, L): row r is (b, h, l) flattened.
extern "C" void kiln_reference_rows(const double* const* in, double* const* out,
                                    const int64_t* dims, const double* /*scalars*/,
                                    const int64_t* rows, int64_t nrows) {
  for (int64_t r = 0; r < nrows; ++r) rotate_row(in, out, dims, rows[r]);
}
