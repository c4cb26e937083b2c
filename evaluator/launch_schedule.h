// The secret schedule of one timing run in the sandbox child (docs/threats.md rows 15 and 16):
// which of a set's input sites each launch changes, so that no two launches on the same contents
// see the same inputs, and which timed launches have their outputs kept for the parent to check,
// chosen by reservoir sampling as the launches happen. Both come from the OS entropy source in the
// child after the request arrives; the candidate sees only its own inputs.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

namespace kiln::eval {

class LaunchSchedule {
 public:
  // `sites_per_set`: sites of each set (at most 16); `check_slots`: launches kept for checking.
  // `seed` 0 draws one from the OS (tests pass their own for reproducible schedules).
  LaunchSchedule(size_t sets, uint32_t sites_per_set, uint32_t check_slots, uint64_t seed = 0);

  // The site mask (bit k: site k applied) of the next launch on contents `set`: per set the masks
  // with three sites come first in a secret order (560 of them for 16 sites), then those with
  // four, and so on, so they do not repeat before 2^sites - 2 launches on that set and each launch
  // writes few sites; the full mask is never returned (closing launches use it).
  uint32_t next_mask(size_t set);
  uint32_t full_mask() const { return full_; }

  // Reservoir sampling over the timed launches: the check slot that timed launch `timed_index`
  // (0, 1, 2, ...; asked once each, in order) takes, or -1 when it is not kept. After n launches
  // every launch is kept with the same probability, min(1, slots / n).
  int keep_slot(uint64_t timed_index);

 private:
  uint32_t full_;
  std::vector<uint32_t> order_;     // every mask but 0 and full: by weight from 3 up, shuffled
  std::vector<uint64_t> launches_;  // per set: launches asked for so far
  uint32_t slots_;
  std::mt19937_64 rng_;
};

}  // namespace kiln::eval
