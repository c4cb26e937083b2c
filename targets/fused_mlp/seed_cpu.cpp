// fused_mlp seed for the cpu backend: plain loops in float. Phase 1 writes the intermediate
// h = silu(x @ w1) * (x @ w3) into the scratch buffer h (rounded to T, as the GPU kernels do),
// phase 2 computes y = h @ w2 from it. The sync scratch is not needed on the cpu (one thread).
#include <cmath>
#include <cstdint>

extern "C" void fused_mlp_seed(const T* x, const T* w1, const T* w3, const T* w2, T* y, T* h,
                               int32_t* /*sync*/, int64_t M, int64_t D, int64_t H) {
  for (int64_t i = 0; i < M; ++i) {
    for (int64_t j = 0; j < H; ++j) {
      float g = 0.f, u = 0.f;
      for (int64_t k = 0; k < D; ++k) {
        g += float(x[i * D + k]) * float(w1[k * H + j]);
        u += float(x[i * D + k]) * float(w3[k * H + j]);
      }
      h[i * H + j] = T(g / (1.f + std::exp(-g)) * u);
    }
  }
  for (int64_t i = 0; i < M; ++i) {
    for (int64_t c = 0; c < D; ++c) {
      float acc = 0.f;
      for (int64_t j = 0; j < H; ++j) acc += float(h[i * H + j]) * float(w2[j * D + c]);
      y[i * D + c] = T(acc);
    }
  }
}
