// The built-in proposer: kiln's search operators over a target's template space without an LLM.
//
// A template (shared/target_spec.h, KernelSpec) is a space of integer parameters (name -> list of
// values, passed as -D macros) with constraints. Given a parent configuration the proposer makes
// one child with a named operator (docs/design.md, "Search"):
//   - "mutate": one parameter moves to a neighbouring value in its list (index +-1, now and then
//     +-2). The parameter comes from the current tier of the playbook -- block size, then memory
//     access, then compute/pipelining, then advanced/structural; parameters no tier names form a
//     last tier. The proposer stays in a tier until `tier_patience` of the mutations it proposed
//     there were reported (report()) without an accepted improvement in a row, then moves to the
//     next tier, wrapping around.
//   - "crossover": every parameter from one of two parents.
//   - "switch_variant": a structural parameter (IMPL, TMA, ...) takes another value and the others
//     are repaired to the nearest valid combination.
// A child that violates the constraints is repaired: the proposer looks for the nearest valid
// combination (fewest other parameters changed, then the smallest moves along their lists) before
// it gives up on that move. It never returns a configuration that violates the constraints or that
// the caller's `seen` predicate reports as already evaluated. When a mutation finds nothing new
// next to the parent it widens to the nearest unseen valid configuration anywhere in the space;
// when there is none the result is empty with the reason "space exhausted around parent".
//
// Profile guidance (propose_guided): a parent's bottleneck class (evaluator/profile/bottleneck.h,
// e.g. "memory_far_from_peak") picks the tier of its first hint that has something to move here
// (memory far from peak -> memory access; spilling -> hold less per thread; low occupancy ->
// smaller blocks) and the direction to try first along the value lists; the description records
// the class and the move. Without a known class it is exactly propose().
//
// Deterministic: the same spec, inputs, report() calls and rng state give the same proposals.
// Not thread-safe: one proposer per search loop (island).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "shared/dtype.h"
#include "shared/target_spec.h"

namespace kiln::eval {
class ConstraintCheck;
}  // namespace kiln::eval

namespace kiln::agent {

// A configuration: parameter name -> value as kiln prints it ("256"). May also hold fixed macros
// (the template's `defines`, as cli::template_configs returns them); only the template's space
// parameters are ever changed, other entries are copied from the parent.
using Params = std::map<std::string, std::string>;

// Whether a configuration was already evaluated (or is queued); such a child is never proposed.
using SeenFn = std::function<bool(const Params&)>;

// Tiers of parameter names in the playbook's order.
using Tiers = std::vector<std::vector<std::string>>;

// The playbook's classification of `spec`'s space parameters by well-known names, always five
// groups (some possibly empty) so that tier indices keep their meaning:
//   0 block/tile size:       BLOCK ROWS TPR RPB WARPS GRID BM BN
//   1 memory access:         VEC ELEMS ITEMS UNROLL HINT WREG OCC CHUNK VB LANES
//   2 compute/pipelining:    BK STAGES WM WN HT TX UNR PIPE
//   3 advanced/structural:   IMPL TMA G ARCH VARIANT ALGO MODE ORDER
//   4 other: every space parameter not named above (e.g. RM, WG, NG), sorted by name.
// Names within a tier are sorted.
Tiers default_tiers(const KernelSpec& spec);

// "block size", "memory access", "compute", "advanced", "other" for tiers 0..4; "tier N" after.
std::string default_tier_name(int tier);

// Steering drawn from a parent's bottleneck class.
struct Guidance {
  int tier = -1;           // the tier to mutate in; -1: none
  int direction = 0;       // +1 larger values first, -1 smaller first, 0 either (random)
  std::string bottleneck;  // the class, as on the wire
  std::string move;        // the hint behind the choice, in words
};

struct BuiltinProposerOptions {
  // Groups of parameter names in the order they are worked on. Empty: default_tiers(spec).
  // Names that are not in the space are ignored; space parameters no group names are appended as
  // a last group.
  Tiers tiers;
  // Names used in descriptions, by tier index; missing ones fall back to default_tier_name() when
  // `tiers` is empty (default tiers) and to none ("tier 2" alone) otherwise.
  std::vector<std::string> tier_names;
  // Parameters switch_variant() changes. Empty: those of default tier 3 (IMPL, TMA, G, ...).
  std::vector<std::string> structural;
  // Mutations reported without an accepted improvement, in a row, before the next tier.
  int tier_patience = 6;
  // Probability that a mutation's first try moves two places along the list instead of one.
  double far_step_probability = 0.15;
  // A mutation that breaks the constraints is repaired by changing at most this many other
  // parameters (before the next move is tried).
  int repair_max_changes = 2;
  // propose(): probability of crossover when a second parent is given, and of switch_variant
  // when the space has a structural parameter; mutation otherwise.
  double crossover_probability = 0.25;
  double switch_probability = 0.1;
  // Upper bound on configurations one search for the nearest valid one examines (large spaces).
  int64_t max_examined = 200000;
};

// One child, or an empty result with the reason.
struct Proposal {
  Params params;              // the child; empty when nothing new could be found
  std::string operator_name;  // "mutate", "crossover", "switch_variant"; "" when empty
  int tier = -1;              // the tier of the parameter the operator chose (-1: crossover/empty)
  // "mutate BLOCK 256->512 (tier 0: block size)"; a repair appends "; repair ELEMS 8->16".
  std::string description;
  std::string reason;         // why the result is empty, e.g. "space exhausted around parent"
  // propose_guided(): the bottleneck class that steered this child's move; "" when none did.
  std::string guided_by;

  bool empty() const { return params.empty(); }
};

// A uniform pick in [0, n) from `rng`, the same on every platform (unlike the distributions):
// the proposer's every random choice, so a seed gives the same proposals everywhere.
size_t pick(std::mt19937_64& rng, size_t n);

class BuiltinProposer {
 public:
  // `spec` must outlive the proposer. `shape` and `dtype` are those the constraints are evaluated
  // at (the benchmark shape and the timed dtype).
  BuiltinProposer(const KernelSpec& spec, Shape shape, DType dtype,
                  BuiltinProposerOptions options = {});
  ~BuiltinProposer();

  // Picks an operator (crossover with `second` when given, now and then switch_variant, else
  // mutate) and falls back to mutate when the chosen one finds nothing.
  Proposal propose(const Params& parent, const Params* second, const SeenFn& seen,
                   std::mt19937_64& rng);

  // The guidance for a parent whose bottleneck class is `bottleneck`: the first of the class's
  // hints whose playbook tier has a movable parameter. None (tier -1) for an unknown or empty
  // class, and with custom `tiers` (the playbook's tier numbers do not apply to them).
  Guidance guidance_for(const std::string& bottleneck) const;

  // propose() steered by the parent's bottleneck class: the same operator draws, but a mutation
  // works in the guidance's tier and tries its direction first; the description ends with
  // "; guided by <class>: <move>". Exactly propose() when guidance_for() gives none.
  Proposal propose_guided(const Params& parent, const Params* second,
                          const std::string& bottleneck, const SeenFn& seen,
                          std::mt19937_64& rng);

  // The operators, each on its own. `parent` (and `second`) must assign every space parameter a
  // value from its list; otherwise the result is empty with the reason.
  Proposal mutate(const Params& parent, const SeenFn& seen, std::mt19937_64& rng);
  Proposal crossover(const Params& first, const Params& second, const SeenFn& seen,
                     std::mt19937_64& rng);
  Proposal switch_variant(const Params& parent, const SeenFn& seen, std::mt19937_64& rng);

  // The outcome of a proposed child: accepted = kept as an improvement. Drives the tier
  // progression (only mutations proposed while the current tier was current count); children this
  // proposer did not propose are ignored.
  void report(const Params& child, bool accepted);

  // Rebuilding after a coordinator restart: `child` was proposed by operator `operator_name`
  // ("mutate ...", "crossover", ...) at this point of the search log. Makes the same note a live
  // proposal made, so replaying the log's proposals and reports brings the tier progression
  // back to where it was.
  void replay_proposal(const Params& child, const std::string& operator_name);

  // Whether `params` (merged over the template's defines) satisfies the constraints. Cached.
  bool valid(const Params& params);
  // Whether `params` is a configuration of the space: a listed value for every parameter, and the
  // constraints met. A seed's own macros are not (the operators need such a parent to move from).
  bool is_configuration(const Params& params);

  int current_tier() const { return current_tier_; }
  const Tiers& tiers() const { return tiers_; }
  // The tier's name in descriptions ("block size"); "" for an unnamed custom tier.
  std::string tier_name(int tier) const;
  const std::vector<std::string>& structural() const { return structural_; }

 private:
  using Config = std::vector<int>;  // an index into each space parameter's list, by names_ order

  struct Pending {
    uint64_t epoch = 0;  // tier_epoch_ when proposed
  };

  bool to_config(const Params& p, Config* c, std::string* why) const;
  Params to_params(const Params& base, const Config& c) const;
  bool config_valid(const Config& c);
  bool usable(const Params& base, const Config& c, const SeenFn& seen);
  // The nearest configuration to `from` that is valid and unseen, changing only positions not in
  // `fixed`, at most `max_changes` of them: fewest changes first, then the smallest sum of index
  // distances; ties are broken by `rng`. False when there is none within the limits.
  bool nearest(const Params& base, const Config& from, const std::vector<bool>& fixed,
               int max_changes, const SeenFn& seen, std::mt19937_64& rng, Config* out);
  // nearest()'s choice made by scanning the space's valid configurations (listed on first use).
  bool nearest_in_space(const Params& base, const Config& from, const std::vector<bool>& fixed,
                        int max_changes, const SeenFn& seen, std::mt19937_64& rng, Config* out);
  std::string describe_changes(const Config& from, const Config& to, int skip) const;
  int tier_of(int position) const;
  std::string tier_label(int tier) const;  // "tier 0: block size", or "tier 0"

  // mutate() starting in `start_tier`, moving each parameter in `direction` first (0: random).
  Proposal mutate_from(const Params& parent, int start_tier, int direction, const SeenFn& seen,
                       std::mt19937_64& rng);
  bool tier_movable(int tier) const;
  void advance_tier();
  Proposal finish(Proposal p, const Params& base, const Config& c);

  const KernelSpec& spec_;
  Shape shape_;
  DType dtype_;
  BuiltinProposerOptions options_;
  std::vector<std::string> names_;                 // space parameters, sorted
  std::vector<std::vector<int64_t>> values_;       // their value lists
  std::map<std::string, int> position_;            // name -> index into names_
  Tiers tiers_;
  std::vector<int> tier_by_position_;
  std::vector<std::string> structural_;
  std::unordered_map<std::string, bool> valid_cache_;
  std::unique_ptr<eval::ConstraintCheck> constraints_;  // parsed once, over names_
  std::optional<std::vector<Config>> space_;  // every valid configuration, once nearest() needs it
  std::map<Params, Pending> pending_;
  int current_tier_ = 0;
  int stall_ = 0;  // mutations of the current tier reported without improvement, in a row
  uint64_t tier_epoch_ = 0;  // advances of the tier so far
};

}  // namespace kiln::agent
