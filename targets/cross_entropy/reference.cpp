// Trusted reference for the cross-entropy loss, in fp64 on the host. Per row:
// lse = max + log(sum exp(x - max)); loss = lse - x[label]. IEEE special values follow from that
// formula alone: NaN in a row, +Inf in a row (Inf - Inf) or an all -Inf row give NaN; a finite
// row whose label's logit is -Inf gives +Inf. Labels arrive as doubles; one outside [0, V) (kiln
// generates none with index_bound) gives NaN rather than reading out of bounds.
#include <cmath>
#include <cstdint>

extern "C" void kiln_reference(const double* const* in, double* const* out, const int64_t* dims,
                               const double* /*scalars*/) {
  const int64_t M = dims[0], V = dims[1];
  for (int64_t r = 0; r < M; ++r) {
    const double* x = in[0] + r * V;
    const double lab = in[1][r];
    if (!(lab >= 0 && lab < static_cast<double>(V))) {
      out[0][r] = NAN;
      continue;
    }
    const int64_t label = static_cast<int64_t>(lab);
    double m = -INFINITY;
    for (int64_t c = 0; c < V; ++c) m = std::fmax(m, x[c]);
    double s = 0;
    for (int64_t c = 0; c < V; ++c) s += std::exp(x[c] - m);
    const double lse = m + std::log(s);
    out[0][r] = lse - x[label];
  }
}

// Rows on demand (kiln re-checks the outputs of timed launches on secret rows): each listed row is
// the entry point above run on a one-row view of the problem (M = 1); rows are independent here.
extern "C" void kiln_reference_rows(const double* const* in, double* const* out,
                                    const int64_t* dims, const double* scalars,
                                    const int64_t* rows, int64_t nrows) {
  const int64_t N = dims[1];
  for (int64_t i = 0; i < nrows; ++i) {
    const int64_t r = rows[i];
    const double* row_in[] = {in[0] + r * N, in[1] + r};
    double* row_out[] = {out[0] + r};
    const int64_t row_dims[] = {1, N};
    kiln_reference(row_in, row_out, row_dims, scalars);
  }
}
