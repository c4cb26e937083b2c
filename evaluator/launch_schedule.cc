// LaunchSchedule: secret site masks per launch and the reservoir of checked launches.
#include "evaluator/launch_schedule.h"

#include <sys/random.h>

#include <algorithm>

namespace kiln::eval {
namespace {

uint64_t os_seed() {
  uint64_t seed = 0;
  // A failed read leaves a zero seed mixed with the clock: weaker, never a crash in the child.
  if (getrandom(&seed, sizeof(seed), 0) != static_cast<ssize_t>(sizeof(seed))) {
    seed ^= static_cast<uint64_t>(std::random_device{}()) << 32;
  }
  return seed;
}

}  // namespace

LaunchSchedule::LaunchSchedule(size_t sets, uint32_t sites_per_set, uint32_t check_slots,
                               uint64_t seed)
    : full_(sites_per_set >= 32 ? 0xFFFFFFFFu : (1u << std::min<uint32_t>(sites_per_set, 31)) - 1),
      launches_(sets, 0),
      slots_(check_slots),
      rng_(seed != 0 ? seed : os_seed()) {
  // Masks by weight: 3, 4, ..., then 2 and 1 (few sites per launch keep the writes before each
  // launch cheap), each weight's masks in a secret order. One pass sorts the masks into their
  // weights (a schedule is made per timing run: 65534 masks for 16 sites, not 14 passes of them).
  const uint32_t sites = std::min<uint32_t>(sites_per_set, 16);
  std::vector<std::vector<uint32_t>> by_weight(33);
  for (uint32_t m = 1; m < full_; ++m) {
    by_weight[static_cast<uint32_t>(__builtin_popcount(m))].push_back(m);
  }
  std::vector<uint32_t> weights;
  for (uint32_t w = 3; w < sites; ++w) weights.push_back(w);
  for (uint32_t w : {2u, 1u}) {
    if (w < sites) weights.push_back(w);
  }
  order_.reserve(full_ > 1 ? full_ - 1 : 0);
  for (uint32_t w : weights) {
    std::vector<uint32_t>& masks = by_weight[w];
    std::shuffle(masks.begin(), masks.end(), rng_);
    order_.insert(order_.end(), masks.begin(), masks.end());
  }
}

uint32_t LaunchSchedule::next_mask(size_t set) {
  if (order_.empty()) return 0;  // fewer than two sites: nothing that is not the closing mask
  return order_[launches_[set]++ % order_.size()];
}

int LaunchSchedule::keep_slot(uint64_t timed_index) {
  if (slots_ == 0) return -1;
  if (timed_index < slots_) return static_cast<int>(timed_index);
  std::uniform_int_distribution<uint64_t> pick(0, timed_index);
  const uint64_t j = pick(rng_);
  return j < slots_ ? static_cast<int>(j) : -1;
}

}  // namespace kiln::eval
