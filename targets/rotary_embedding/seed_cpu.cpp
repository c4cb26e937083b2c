// rotary_embedding seed for the cpu backend: one loop over rows (b, h, l) and the R pairs of each
// row, in float: y[i] = x[i] c - x[i+R] s, y[i+R] = x[i+R] c + x[i] s with c, s = cos/sin[l, i].
#include <cstdint>

extern "C" void rotary_embedding_seed(const T* x, const T* cs, const T* sn, T* y, int64_t B,
                                      int64_t H, int64_t L, int64_t D, int64_t R) {
  for (int64_t row = 0; row < B * H * L; ++row) {
    const int64_t l = row % L;
    const T* xr = x + row * D;
    T* yr = y + row * D;
    for (int64_t i = 0; i < R; ++i) {
      const float c = float(cs[l * R + i]), s = float(sn[l * R + i]);
      const float a = float(xr[i]), b = float(xr[i + R]);
      yr[i] = T(a * c - b * s);
      yr[i + R] = T(b * c + a * s);
    }
  }
}
