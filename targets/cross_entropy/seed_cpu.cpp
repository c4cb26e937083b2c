// Cross-entropy seed for the cpu backend: per row, pass 1 the max, pass 2 the sum of
// exp(x - max) in float, then loss = max + log(sum) - x[label] (NaN for a label outside [0, V)).
#include <cmath>
#include <cstdint>

extern "C" void cross_entropy_seed(const T* logits, const int32_t* labels, float* loss, int64_t M,
                                   int64_t V) {
  for (int64_t r = 0; r < M; ++r) {
    const T* x = logits + r * V;
    const int32_t label = labels[r];
    if (label < 0 || label >= V) {
      loss[r] = NAN;
      continue;
    }
    float m = -INFINITY;
    for (int64_t c = 0; c < V; ++c) m = std::fmax(m, float(x[c]));
    float s = 0.f;
    for (int64_t c = 0; c < V; ++c) s += std::exp(float(x[c]) - m);
    loss[r] = (m + std::log(s)) - float(x[label]);
  }
}
