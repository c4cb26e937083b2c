// docs/threats.md row 20 (a stale replay smaller than the tolerance), on cross_entropy: remembers
// the losses of every input it has seen, keyed on the shape, the first label and 16 fixed logits,
// and replays them on a match. One logit moved by a few units changes a row's loss by ~1e-5 among
// 32768 classes -- inside the tolerance -- so a small change before the checked launch let the
// stale losses pass; the sites move far above the row's largest logits, which moves the loss by
// units.
#include <cmath>
#include <cstdint>
#include <cstring>

namespace {
constexpr int64_t kCapacity = 4096;  // rows
constexpr int kSlots = 8;
constexpr int kSamples = 16;
struct Entry {
  bool used = false;
  int64_t m = -1, v = -1;
  int32_t label0 = -1;
  T key[kSamples];
  float loss[kCapacity];
};
Entry entries[kSlots];
int next_slot = 0;
}  // namespace

extern "C" void cross_entropy_seed(const T* logits, const int32_t* labels, float* loss, int64_t M,
                                   int64_t V) {
  T key[kSamples];
  for (int k = 0; k < kSamples; ++k) key[k] = logits[(M * V - 1) * k / (kSamples - 1)];
  for (Entry& e : entries) {
    if (e.used && e.m == M && e.v == V && e.label0 == labels[0] &&
        std::memcmp(e.key, key, sizeof(key)) == 0) {
      std::memcpy(loss, e.loss, static_cast<size_t>(M) * sizeof(float));
      return;
    }
  }
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
  if (M <= kCapacity) {
    Entry& e = entries[next_slot];
    next_slot = (next_slot + 1) % kSlots;
    e.used = true;
    e.m = M;
    e.v = V;
    e.label0 = labels[0];
    std::memcpy(e.key, key, sizeof(key));
    std::memcpy(e.loss, loss, static_cast<size_t>(M) * sizeof(float));
  }
}
