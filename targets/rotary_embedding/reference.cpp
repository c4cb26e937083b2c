// Trusted reference for rotary_embedding (GPT-NeoX rotate-half), in fp64 on the host. For each
// row (b, h, l) of x[B, H, L, D] and each i < R (D = 2R):
//   y[i]     = x[i] * cos[l, i] - x[i + R] * sin[l, i]
//   y[i + R] = x[i + R] * cos[l, i] + x[i] * sin[l, i]
#include <cstdint>

extern "C" void kiln_reference(const double* const* in, double* const* out, const int64_t* dims,
                               const double* /*scalars*/) {
  const int64_t B = dims[0], H = dims[1], L = dims[2], D = dims[3], R = dims[4];
  const double* x = in[0];
  const double* cs = in[1];
  const double* sn = in[2];
  double* y = out[0];
  for (int64_t row = 0; row < B * H * L; ++row) {
    const int64_t l = row % L;
    const double* xr = x + row * D;
    double* yr = y + row * D;
    for (int64_t i = 0; i < R; ++i) {
      const double c = cs[l * R + i], s = sn[l * R + i];
      yr[i] = xr[i] * c - xr[i + R] * s;
      yr[i + R] = xr[i + R] * c + xr[i] * s;
    }
  }
}
