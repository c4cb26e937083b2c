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
  multiplier_ = static_cast<uint32_t>(rng_()) | 1u;  // odd: a bijection modulo a power of two
  offset_ = static_cast<uint32_t>(rng_());
}

uint32_t LaunchSchedule::next_mask(size_t set) {
  if (full_ == 0) return 0;  // no sites: nothing to change
  const uint64_t period = uint64_t{full_} + 1;
  while (true) {
    const uint64_t n = launches_[set]++;
    const uint32_t mask = static_cast<uint32_t>((n % period * multiplier_ + offset_) & full_);
    if (mask != full_) return mask;
  }
}

int LaunchSchedule::keep_slot(uint64_t timed_index) {
  if (slots_ == 0) return -1;
  if (timed_index < slots_) return static_cast<int>(timed_index);
  std::uniform_int_distribution<uint64_t> pick(0, timed_index);
  const uint64_t j = pick(rng_);
  return j < slots_ ? static_cast<int>(j) : -1;
}

}  // namespace kiln::eval
