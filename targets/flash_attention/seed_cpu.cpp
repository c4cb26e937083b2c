// Attention seed for the cpu backend (f32): per (b, h, query row) three plain loops in float,
// the reference's formula: m = max of the visible scores, then p_j = exp(s_j - m), the sum of
// p_j and sum_j p_j v_j accumulated together, o = acc / sum. Output columns are done in chunks of
// 64 (scores recomputed per chunk) so no heap memory is needed.
#include <cmath>
#include <cstdint>

static float score(const T* qi, const T* kj, int64_t D, float scale) {
  float dot = 0.f;
  for (int64_t d = 0; d < D; ++d) dot += float(qi[d]) * float(kj[d]);
  return scale * dot;
}

extern "C" void flash_attention_seed(const T* q, const T* k, const T* v, T* o, int64_t B, int64_t H,
                                     int64_t L, int64_t D, int64_t MASK, float scale) {
  constexpr int64_t kChunk = 64;
  for (int64_t bh = 0; bh < B * H; ++bh) {
    const T* qb = q + bh * L * D;
    const T* kb = k + bh * L * D;
    const T* vb = v + bh * L * D;
    T* ob = o + bh * L * D;
    for (int64_t i = 0; i < L; ++i) {
      const int64_t n = MASK == 2 ? i + 1 : L;  // MASK 2: causal
      float m = -INFINITY;
      for (int64_t j = 0; j < n; ++j) m = std::fmax(m, score(qb + i * D, kb + j * D, D, scale));
      for (int64_t d0 = 0; d0 < D; d0 += kChunk) {
        const int64_t dn = D - d0 < kChunk ? D - d0 : kChunk;
        float acc[kChunk] = {};
        float sum = 0.f;
        for (int64_t j = 0; j < n; ++j) {
          const float p = std::exp(score(qb + i * D, kb + j * D, D, scale) - m);
          sum += p;
          for (int64_t d = 0; d < dn; ++d) acc[d] += p * float(vb[j * D + d0 + d]);
        }
        for (int64_t d = 0; d < dn; ++d) ob[i * D + d0 + d] = T(acc[d] / sum);
      }
    }
  }
}
