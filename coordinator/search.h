// The coordinator's search logic without I/O: populations of elites split into islands, parent
// selection, acceptance of a child (keep/revert), crowning of a new best after a re-time,
// migration, convergence per target, the Amdahl allocation of evaluation slots across targets,
// and candidate ids for dedupe (docs/design.md, "Search" and "Candidates").
//
// With one island and a population of one this is exactly the keep/revert loop: the only elite is
// always the parent, a child replaces it when it is faster by more than max(min gain, noise), and
// is dropped otherwise. Everything random draws from the caller's generator, so the same inputs
// and seed give the same search. Nothing here touches Redis: the caller persists what changes and
// rebuilds a Population after a restart with restore() and restore_crown(). Not thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "shared/config.h"
#include "shared/status.h"

namespace kiln::coordinator {

// Knobs of the search. Defaults are the values used when the run config does not name them.
struct SearchParams {
  uint32_t islands = 2;
  uint32_t capacity = 8;            // elites kept per island
  double min_gain_rel = 0.01;       // acceptance: least relative gain over the parent
  double rank_alpha = 1.0;          // selection weight falls as 1 / (rank + 1)^alpha ...
  double children_beta = 1.0;       // ... and as 1 / (1 + children)^beta
  uint32_t migration_interval = 16; // accepted children between migrations (0: never migrate)
};

// The run config's search section as SearchParams (fields it lacks keep their defaults).
SearchParams search_params_from(const SearchConfig& config);

// The most islands a target has, and elites an island keeps: each is held in memory per target
// and GPU model (a search needs a handful of islands of a few dozen).
inline constexpr uint32_t kMaxIslands = 1024;
inline constexpr size_t kMaxPopulation = 65536;

// OK, or INVALID_ARGUMENT naming the first bad field (zero islands or capacity, a negative or
// non-finite gain or exponent). Check user-supplied params before building a Population.
Status check_search_params(const SearchParams& params);

// One verified candidate as the search sees it.
struct Individual {
  std::string id;                             // candidate id (candidate_id() below)
  std::map<std::string, std::string> params;  // template parameter values
  double median_us = 0;                       // median time at the benchmark shape
  double noise_rel = 0;                       // relative IQR of its timing samples
  std::string parent_id;                      // empty for a seed
  std::string op;                             // operator that made it ("seed", "mutate", ...)
  uint32_t generation = 0;                    // parent's generation + 1; seeds are 0
  uint32_t island = 0;                        // island it was born in (migrants keep it)
  uint32_t children = 0;                      // proposals made from it in the island holding it
};

// An island's elites, fastest first, at most `capacity` of them. Ties in time keep the one that
// arrived first ahead.
class Island {
 public:
  explicit Island(size_t capacity);

  // Inserts `ind` in time order and drops the slowest past capacity. Returns whether `ind` is
  // held afterwards: false when its id is already here or it was the one dropped.
  bool insert(Individual ind);

  // The elite with this id, or nullptr.
  const Individual* find(std::string_view id) const;
  Individual* find(std::string_view id);

  // Whether an elite with this id is held.
  bool contains(std::string_view id) const { return find(id) != nullptr; }

  // The fastest elite, or nullptr when empty.
  const Individual* best() const { return elites_.empty() ? nullptr : &elites_.front(); }

  // The elites, fastest first.
  const std::vector<Individual>& elites() const { return elites_; }
  size_t size() const { return elites_.size(); }
  bool empty() const { return elites_.empty(); }
  size_t capacity() const { return capacity_; }

 private:
  size_t capacity_;
  std::vector<Individual> elites_;
};

// Selection weight of each elite of `island`, in elite order:
//   w = 1 / (rank + 1)^alpha / (1 + children)^beta
// where rank counts the elites strictly faster (equal times share a rank).
std::vector<double> selection_weights(const Island& island, const SearchParams& params);

// Draws a parent with probability proportional to selection_weights(); nullptr when the island is
// empty. Uses its own mapping from rng() to [0, 1), so a seed gives the same draw on any libc++.
const Individual* select_parent(const Island& island, const SearchParams& params,
                                std::mt19937_64& rng);

// The outcome of judging a measurement against a reference (a child against its parent, a
// re-timed best against the crowned one).
struct Decision {
  bool keep = false;
  std::string reason;          // why, with the numbers ("faster than parent by 5.00% > 1.00%")
  double gain_rel = 0;         // 1 - time / reference time: > 0 when faster
  double threshold_rel = 0;    // max(min_gain_rel, reference noise, measured noise)
  bool needs_retime = false;   // Population::offer_child: kept and now pending re-time as best
  size_t migrated = 0;         // Population::offer_child: migrants copied after this acceptance
};

// The acceptance rule. keep iff the time is finite and positive and
//   gain_rel = (reference_us - median_us) / reference_us  >  threshold_rel
//   threshold_rel = max(min_gain_rel, reference.noise_rel, noise_rel)
// i.e. strictly faster by more than both the least gain and either measurement's noise; a gain
// equal to the threshold is reverted. `what` names the reference in the reason ("parent").
Decision judge(const Individual& reference, double median_us, double noise_rel,
               double min_gain_rel, std::string_view what);

// Where a crowning stands.
enum class CrownState { kNeedsRetime, kCrowned, kRejected };

struct CrownStep {
  CrownState state = CrownState::kRejected;
  std::string reason;
};

// The islands of one (target, arch), the crowned best and the counters that drive migration and
// convergence.
class Population {
 public:
  // Aborts on params that check_search_params() rejects: check user input first.
  Population(std::string target, std::string arch, SearchParams params);

  // Puts `seed` (op "seed", generation 0) in every island without judging it, and crowns it when
  // nothing is crowned: the seed's time is the baseline every child is measured against.
  void add_seed(const Individual& seed);

  // Rebuilding from Redis after a restart: inserts into `island` without judging.
  // INVALID_ARGUMENT when the island does not exist.
  Status restore(size_t island, Individual ind);

  // Rebuilding from Redis after a restart: sets the crowned best without a re-time.
  void restore_crown(Individual best);

  // Draws a parent from `island` (select_parent()); nullptr when it is empty or does not exist.
  const Individual* select_parent(size_t island, std::mt19937_64& rng) const;

  // Counts one proposal made from `parent_id` in `island`: the parent's children go up (so it is
  // chosen less) and so does proposals_since_improvement(). Call it for every proposal sent,
  // whatever becomes of it. NOT_FOUND when the parent is not in that island (it was dropped; the
  // proposal still counts towards convergence).
  Status record_proposal(size_t island, std::string_view parent_id);

  // Judges a verified child against `parent` (the parent as it was when the proposal was made;
  // it may have been dropped from the island since) with judge(). A kept child goes into
  // child.island; it is reverted instead when that island is full of faster elites or already
  // holds its id. A kept child that beats the crowned best is proposed for the crown
  // (needs_retime), and every migration_interval kept children the islands migrate.
  // INVALID_ARGUMENT when child.parent_id is not parent.id or child.island does not exist.
  Result<Decision> offer_child(const Individual& parent, Individual child);

  // Copies the best elite of island i to island (i + 1) % n when that island does not hold its
  // id, for every i at once (a migrant does not travel on in the same round); children of the
  // copy start at 0. Returns how many copies stayed. No-op with one island.
  size_t migrate();

  // First step of crowning: `candidate` must beat the crowned best by the acceptance rule (and be
  // faster than any candidate already pending, which it then replaces). kNeedsRetime when it is
  // now pending; kRejected with the reason otherwise.
  CrownStep propose_crown(const Individual& candidate);

  // Second step: the pending candidate `id` was re-timed (on a second GPU when there is one).
  // Crowns it, with the re-timed time and noise, only if that still beats the crowned best by the
  // acceptance rule; otherwise rejects it with the reason. Either way nothing is pending after.
  // A crowning resets proposals_since_improvement().
  CrownStep confirm_crown(std::string_view id, double retimed_median_us, double retimed_noise_rel);

  // The crowned best, if any, and the candidate pending re-time, if any.
  const std::optional<Individual>& crowned() const { return crowned_; }
  const std::optional<Individual>& pending_crown() const { return pending_; }

  // Proposals recorded since the last crowning (or since the start).
  uint64_t proposals_since_improvement() const { return proposals_since_improvement_; }

  // Children kept over the population's life.
  uint64_t accepted() const { return accepted_; }

  const std::string& target() const { return target_; }
  const std::string& arch() const { return arch_; }
  const SearchParams& params() const { return params_; }
  const std::vector<Island>& islands() const { return islands_; }
  const Island& island(size_t i) const { return islands_.at(i); }

 private:
  std::string target_;
  std::string arch_;
  SearchParams params_;
  std::vector<Island> islands_;
  std::optional<Individual> crowned_;
  std::optional<Individual> pending_;
  uint64_t accepted_ = 0;
  uint64_t proposals_since_improvement_ = 0;
};

// When a target's search stops. A limit of 0 is off.
struct ConvergenceLimits {
  uint64_t max_proposals_without_gain = 64;  // proposals since the last crowning
  double floor_fraction = 0;                 // stop once floor_us / best_us >= this (e.g. 0.9)
  double time_budget_s = 0;                  // stop once this much time has passed
  double speedup_target = 0;                 // stop once seed_us / best_us >= this
};

// The run config's search section as ConvergenceLimits.
ConvergenceLimits convergence_limits_from(const SearchConfig& config);

// Where a target's search stands, as the caller measures it.
struct ConvergenceState {
  uint64_t proposals_since_improvement = 0;
  double best_us = 0;     // crowned best
  double seed_us = 0;     // baseline (0: unknown, the speedup limit does not apply)
  double floor_us = 0;    // physical floor at the benchmark shape (0: unknown)
  double elapsed_s = 0;   // since the target's search began
};

// The first limit reached, as a reason ("converged: no improvement in 200 proposals"), or nothing.
// Checked in the order: proposals, floor, time budget, speedup.
std::optional<std::string> convergence_reason(const ConvergenceLimits& limits,
                                              const ConvergenceState& state);

// One target's standing for the allocation of evaluation slots.
struct TargetShare {
  std::string target;
  double weight = 0;      // share of end-to-end time at the seed; all 0: equal shares
  double best_us = 0;     // crowned best now (> 0)
  double seed_us = 0;     // baseline (0: taken as best_us)
  double floor_us = 0;    // physical floor (0: unknown, the whole time is headroom)
  bool converged = false;
};

struct SlotAllocation {
  std::string target;
  double expected_gain = 0;  // fraction of end-to-end time that more search could remove
  uint32_t slots = 0;
};

// Splits `slots` evaluation slots across targets by expected end-to-end gain (Amdahl's law).
// Target i now takes the share f_i = w_i * (best_i / seed_i) / sum_j w_j * (best_j / seed_j) of
// end-to-end time (the weights are shares at the seed, normalized; a faster target takes less).
// Reaching its floor would speed it up by s_i = best_i / floor_i and the whole by
// S_i = 1 / ((1 - f_i) + f_i / s_i), removing 1 - 1/S_i = f_i * (best_i - floor_i) / best_i of
// the end-to-end time: that is its expected gain, 0 when converged or at the floor. Slots go in
// proportion to gain with largest-remainder rounding (ties: larger gain, then input order); when
// there are at least as many slots as targets with gain, each gets at least one. Results are in
// input order. INVALID_ARGUMENT on a negative or non-finite weight or a non-positive best time.
Result<std::vector<SlotAllocation>> allocate_slots(const std::vector<TargetShare>& targets,
                                                   uint32_t slots);

// Content hash that names a candidate: lower-case hex SHA-256 over a versioned, length-prefixed
// encoding of the fields (params in key order, so the order they were built in does not matter).
std::string candidate_id(std::string_view spec_hash, std::string_view backend,
                         std::string_view source_text,
                         const std::map<std::string, std::string>& params,
                         std::string_view toolchain_version);

// Candidate ids already evaluated or queued: a candidate is sent out once.
class SeenSet {
 public:
  // Adds `id`; true when it was new.
  bool insert(std::string_view id) { return ids_.emplace(id).second; }
  // Whether `id` was added.
  bool contains(std::string_view id) const { return ids_.count(std::string(id)) != 0; }
  size_t size() const { return ids_.size(); }

 private:
  std::unordered_set<std::string> ids_;
};

}  // namespace kiln::coordinator
