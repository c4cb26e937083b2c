// rotary_embedding template for the cpu backend. ORDER 0 walks rows (b, h, l) in memory order;
// ORDER 1 walks positions l outermost and the B * H rows of that position inside, so each cos/sin
// row is loaded once and stays in L1 for all heads. The inner loop over i < R vectorizes.
#include <cstdint>

#ifndef ORDER
#define ORDER 0
#endif

static inline void rotate_row(const T* xr, const T* cr, const T* sr, T* yr, int64_t R) {
  for (int64_t i = 0; i < R; ++i) {
    const float c = float(cr[i]), s = float(sr[i]);
    const float a = float(xr[i]), b = float(xr[i + R]);
    yr[i] = T(a * c - b * s);
    yr[i + R] = T(b * c + a * s);
  }
}

extern "C" void rotary_embedding(const T* x, const T* cs, const T* sn, T* y, int64_t B, int64_t H,
                                 int64_t L, int64_t D, int64_t R) {
  if (ORDER == 0) {
    for (int64_t row = 0; row < B * H * L; ++row) {
      const int64_t l = row % L;
      rotate_row(x + row * D, cs + l * R, sn + l * R, y + row * D, R);
    }
  } else {
    for (int64_t l = 0; l < L; ++l) {
      for (int64_t bh = 0; bh < B * H; ++bh) {
        const int64_t row = bh * L + l;
        rotate_row(x + row * D, cs + l * R, sn + l * R, y + row * D, R);
      }
    }
  }
}
