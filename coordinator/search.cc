// The coordinator's search logic: islands of elites, selection, acceptance, crowning, migration,
// convergence, the Amdahl allocation of slots and candidate ids. See search.h for the contracts.
#include "coordinator/search.h"

#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <numeric>
#include <utility>

#include "shared/hash.h"

namespace kiln::coordinator {
namespace {

// printf into a std::string: reasons carry numbers with a fixed number of decimals.
std::string format(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
std::string format(const char* fmt, ...) {
  char buf[256];
  va_list args;
  va_start(args, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, args);
  va_end(args);
  return buf;
}

bool finite_non_negative(double x) { return std::isfinite(x) && x >= 0; }

// A uniform double in [0, 1) from the top 53 bits of one draw. std::uniform_real_distribution is
// not specified bit for bit, so it could give another sequence on another standard library.
double uniform01(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

}  // namespace

SearchParams search_params_from(const SearchConfig& config) {
  SearchParams p;
  p.islands = config.islands;
  p.capacity = config.population;
  p.min_gain_rel = config.min_gain_rel;
  p.rank_alpha = config.rank_alpha;
  p.children_beta = config.children_beta;
  p.migration_interval = config.migration_interval;
  return p;
}

Status check_search_params(const SearchParams& p) {
  if (p.islands == 0 || p.islands > kMaxIslands) {
    return invalid_argument("search.islands: must be from 1 to " + std::to_string(kMaxIslands));
  }
  if (p.capacity == 0 || p.capacity > kMaxPopulation) {
    return invalid_argument("search.population: must be from 1 to " +
                            std::to_string(kMaxPopulation));
  }
  if (!finite_non_negative(p.min_gain_rel)) {
    return invalid_argument("search.min_gain_rel: must be a finite number >= 0");
  }
  if (!finite_non_negative(p.rank_alpha)) {
    return invalid_argument("search.rank_alpha: must be a finite number >= 0");
  }
  if (!finite_non_negative(p.children_beta)) {
    return invalid_argument("search.children_beta: must be a finite number >= 0");
  }
  return Status::ok();
}

// ---- Island ----

Island::Island(size_t capacity) : capacity_(capacity) {
  KILN_CHECK(capacity_ > 0, "an island holds at least one elite");
}

bool Island::insert(Individual ind) {
  if (contains(ind.id)) return false;
  // upper_bound: after every elite of equal time, so the earlier arrival stays ahead.
  auto at = std::upper_bound(elites_.begin(), elites_.end(), ind.median_us,
                             [](double t, const Individual& e) { return t < e.median_us; });
  const size_t index = static_cast<size_t>(at - elites_.begin());
  if (index >= capacity_) return false;
  elites_.insert(at, std::move(ind));
  if (elites_.size() > capacity_) elites_.pop_back();
  return true;
}

const Individual* Island::find(std::string_view id) const {
  for (const Individual& e : elites_) {
    if (e.id == id) return &e;
  }
  return nullptr;
}

Individual* Island::find(std::string_view id) {
  return const_cast<Individual*>(static_cast<const Island*>(this)->find(id));
}

// ---- Selection ----

std::vector<double> selection_weights(const Island& island, const SearchParams& params) {
  const std::vector<Individual>& elites = island.elites();
  std::vector<double> weights(elites.size());
  size_t rank = 0;
  for (size_t i = 0; i < elites.size(); ++i) {
    if (i > 0 && elites[i].median_us > elites[i - 1].median_us) rank = i;
    weights[i] = 1.0 / std::pow(static_cast<double>(rank + 1), params.rank_alpha) /
                 std::pow(1.0 + elites[i].children, params.children_beta);
  }
  return weights;
}

const Individual* select_parent(const Island& island, const SearchParams& params,
                                std::mt19937_64& rng) {
  if (island.empty()) return nullptr;
  const std::vector<double> weights = selection_weights(island, params);
  const double total = std::accumulate(weights.begin(), weights.end(), 0.0);
  double u = uniform01(rng) * total;
  for (size_t i = 0; i < weights.size(); ++i) {
    if (u < weights[i]) return &island.elites()[i];
    u -= weights[i];
  }
  return &island.elites().back();  // rounding left u just past the last weight
}

// ---- Acceptance ----

Decision judge(const Individual& reference, double median_us, double noise_rel,
               double min_gain_rel, std::string_view what) {
  Decision d;
  const std::string ref(what);
  if (!std::isfinite(median_us) || median_us <= 0) {
    d.reason = format("invalid time %g us", median_us);
    return d;
  }
  if (!std::isfinite(reference.median_us) || reference.median_us <= 0) {
    d.reason = format("%s has an invalid time %g us", ref.c_str(), reference.median_us);
    return d;
  }
  // Noise is a spread: a missing (NaN) or negative one counts as none, not as a veto.
  const double ref_noise = finite_non_negative(reference.noise_rel) ? reference.noise_rel : 0.0;
  const double own_noise = finite_non_negative(noise_rel) ? noise_rel : 0.0;
  d.gain_rel = (reference.median_us - median_us) / reference.median_us;
  d.threshold_rel = std::max({min_gain_rel, ref_noise, own_noise});
  d.keep = d.gain_rel > d.threshold_rel;
  if (d.keep) {
    d.reason = format("faster than %s by %.2f%% > threshold %.2f%%", ref.c_str(),
                      100 * d.gain_rel, 100 * d.threshold_rel);
  } else if (d.gain_rel <= 0) {
    d.reason = format("not faster than %s (%.2f%% slower)", ref.c_str(), -100 * d.gain_rel);
  } else {
    d.reason = format("gain over %s %.2f%% within threshold %.2f%% (min gain %.2f%%, noise "
                      "%.2f%% / %.2f%%)",
                      ref.c_str(), 100 * d.gain_rel, 100 * d.threshold_rel, 100 * min_gain_rel,
                      100 * ref_noise, 100 * own_noise);
  }
  return d;
}

// ---- Population ----

Population::Population(std::string target, std::string arch, SearchParams params)
    : target_(std::move(target)), arch_(std::move(arch)), params_(params) {
  Status ok = check_search_params(params_);
  KILN_CHECK(ok.is_ok(), ok.message());
  islands_.assign(params_.islands, Island(params_.capacity));
}

void Population::add_seed(const Individual& seed) {
  for (Island& island : islands_) island.insert(seed);
  if (!crowned_) crowned_ = seed;
}

Status Population::restore(size_t island, Individual ind) {
  if (island >= islands_.size()) {
    return invalid_argument(format("island %zu does not exist (%zu islands)", island,
                                   islands_.size()));
  }
  islands_[island].insert(std::move(ind));
  return Status::ok();
}

void Population::restore_crown(Individual best) { crowned_ = std::move(best); }

const Individual* Population::select_parent(size_t island, std::mt19937_64& rng) const {
  if (island >= islands_.size()) return nullptr;
  return coordinator::select_parent(islands_[island], params_, rng);
}

Status Population::record_proposal(size_t island, std::string_view parent_id) {
  ++proposals_since_improvement_;
  Individual* parent = island < islands_.size() ? islands_[island].find(parent_id) : nullptr;
  if (parent == nullptr) {
    return not_found(format("parent %.*s is not in island %zu", static_cast<int>(parent_id.size()),
                            parent_id.data(), island));
  }
  ++parent->children;
  return Status::ok();
}

Result<Decision> Population::offer_child(const Individual& parent, Individual child) {
  if (child.parent_id != parent.id) {
    return invalid_argument("child " + child.id + " names parent '" + child.parent_id +
                            "', judged against '" + parent.id + "'");
  }
  if (child.island >= islands_.size()) {
    return invalid_argument(format("island %u does not exist (%zu islands)", child.island,
                                   islands_.size()));
  }
  Decision d = judge(parent, child.median_us, child.noise_rel, params_.min_gain_rel, "parent");
  if (!d.keep) return d;

  Island& island = islands_[child.island];
  if (island.contains(child.id)) {
    d.keep = false;
    d.reason = "already in island " + std::to_string(child.island);
    return d;
  }
  Individual kept = child;  // for the crown; `child` moves into the island
  if (!island.insert(std::move(child))) {
    d.keep = false;
    d.reason += "; but island " + std::to_string(kept.island) + " is full of faster elites";
    return d;
  }
  ++accepted_;
  if (!crowned_ || kept.median_us < crowned_->median_us) {
    d.needs_retime = propose_crown(kept).state == CrownState::kNeedsRetime;
  }
  if (params_.migration_interval > 0 && accepted_ % params_.migration_interval == 0) {
    d.migrated = migrate();
  }
  return d;
}

size_t Population::migrate() {
  const size_t n = islands_.size();
  if (n < 2) return 0;
  std::vector<std::optional<Individual>> bests(n);
  for (size_t i = 0; i < n; ++i) {
    if (const Individual* b = islands_[i].best()) bests[i] = *b;
  }
  size_t moved = 0;
  for (size_t i = 0; i < n; ++i) {
    if (!bests[i]) continue;
    Individual migrant = *bests[i];
    migrant.children = 0;
    if (islands_[(i + 1) % n].insert(std::move(migrant))) ++moved;
  }
  return moved;
}

CrownStep Population::propose_crown(const Individual& candidate) {
  if (crowned_) {
    if (crowned_->id == candidate.id) return {CrownState::kRejected, "already crowned"};
    Decision d = judge(*crowned_, candidate.median_us, candidate.noise_rel, params_.min_gain_rel,
                       "best");
    if (!d.keep) return {CrownState::kRejected, d.reason};
  } else if (!std::isfinite(candidate.median_us) || candidate.median_us <= 0) {
    return {CrownState::kRejected, format("invalid time %g us", candidate.median_us)};
  }
  if (pending_ && pending_->id != candidate.id && candidate.median_us >= pending_->median_us) {
    return {CrownState::kRejected, "not faster than " + pending_->id + ", pending re-time"};
  }
  pending_ = candidate;
  return {CrownState::kNeedsRetime, "pending re-time before it is crowned"};
}

CrownStep Population::confirm_crown(std::string_view id, double retimed_median_us,
                                    double retimed_noise_rel) {
  if (!pending_) return {CrownState::kRejected, "no longer pending re-time"};
  if (pending_->id != id) {
    // A faster candidate took its place while this re-time ran; that one's re-time decides.
    return {CrownState::kRejected, "no longer pending re-time: " + pending_->id.substr(0, 12) +
                                       " (faster) took its place"};
  }
  Individual candidate = std::move(*pending_);
  pending_.reset();
  if (crowned_) {
    Decision d = judge(*crowned_, retimed_median_us, retimed_noise_rel, params_.min_gain_rel,
                       "best");
    if (!d.keep) return {CrownState::kRejected, "re-time: " + d.reason};
  } else if (!std::isfinite(retimed_median_us) || retimed_median_us <= 0) {
    return {CrownState::kRejected, format("re-time: invalid time %g us", retimed_median_us)};
  }
  candidate.median_us = retimed_median_us;
  candidate.noise_rel = retimed_noise_rel;
  crowned_ = std::move(candidate);
  proposals_since_improvement_ = 0;
  return {CrownState::kCrowned, format("crowned at %.3f us after re-time", retimed_median_us)};
}

// ---- Convergence ----

ConvergenceLimits convergence_limits_from(const SearchConfig& config) {
  ConvergenceLimits l;
  l.max_proposals_without_gain = config.max_proposals_without_gain;
  l.time_budget_s = config.time_budget_s;
  l.floor_fraction = config.floor_fraction;
  l.speedup_target = config.speedup_target;
  return l;
}

std::optional<std::string> convergence_reason(const ConvergenceLimits& limits,
                                              const ConvergenceState& s) {
  if (limits.max_proposals_without_gain > 0 &&
      s.proposals_since_improvement >= limits.max_proposals_without_gain) {
    return format("converged: no improvement in %llu proposals",
                  static_cast<unsigned long long>(s.proposals_since_improvement));
  }
  const bool best_known = std::isfinite(s.best_us) && s.best_us > 0;
  if (limits.floor_fraction > 0 && best_known && s.floor_us > 0 &&
      s.floor_us / s.best_us >= limits.floor_fraction) {
    return format("converged: %.1f%% of the floor reached (limit %.1f%%)",
                  100 * s.floor_us / s.best_us, 100 * limits.floor_fraction);
  }
  if (limits.time_budget_s > 0 && s.elapsed_s >= limits.time_budget_s) {
    return format("converged: time budget of %.0f s spent", limits.time_budget_s);
  }
  if (limits.speedup_target > 0 && best_known && s.seed_us > 0 &&
      s.seed_us / s.best_us >= limits.speedup_target) {
    return format("converged: %.2fx speedup over the seed reached (target %.2fx)",
                  s.seed_us / s.best_us, limits.speedup_target);
  }
  return std::nullopt;
}

// ---- Amdahl allocation ----

namespace {

// Largest-remainder rounding of `slots` over `gains` restricted to `members`; adds to `out`.
void largest_remainder(const std::vector<double>& gains, const std::vector<size_t>& members,
                       uint32_t slots, std::vector<uint32_t>& out) {
  double total = 0;
  for (size_t i : members) total += gains[i];
  if (members.empty() || total <= 0 || slots == 0) return;
  std::vector<double> remainder(gains.size(), 0.0);
  uint32_t given = 0;
  for (size_t i : members) {
    const double quota = slots * gains[i] / total;
    const auto whole = static_cast<uint32_t>(std::floor(quota));
    out[i] += whole;
    given += whole;
    remainder[i] = quota - whole;
  }
  std::vector<size_t> order = members;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (remainder[a] != remainder[b]) return remainder[a] > remainder[b];
    if (gains[a] != gains[b]) return gains[a] > gains[b];
    return a < b;
  });
  for (size_t k = 0; given < slots; k = (k + 1) % order.size(), ++given) ++out[order[k]];
}

}  // namespace

Result<std::vector<SlotAllocation>> allocate_slots(const std::vector<TargetShare>& targets,
                                                   uint32_t slots) {
  const size_t n = targets.size();
  bool any_weight = false;
  for (const TargetShare& t : targets) {
    if (!finite_non_negative(t.weight)) {
      return invalid_argument("target " + t.target + ": weight must be a finite number >= 0");
    }
    if (!std::isfinite(t.best_us) || t.best_us <= 0) {
      return invalid_argument("target " + t.target + ": best time must be positive");
    }
    any_weight = any_weight || t.weight > 0;
  }
  // Current shares of end-to-end time: the seed shares scaled by how much faster each target is.
  std::vector<double> share(n, 0.0);
  double share_total = 0;
  for (size_t i = 0; i < n; ++i) {
    const TargetShare& t = targets[i];
    const double seed_us = t.seed_us > 0 ? t.seed_us : t.best_us;
    share[i] = (any_weight ? t.weight : 1.0) * t.best_us / seed_us;
    share_total += share[i];
  }
  std::vector<SlotAllocation> out(n);
  std::vector<double> gain(n, 0.0);
  std::vector<size_t> open;  // targets with gain > 0
  for (size_t i = 0; i < n; ++i) {
    const TargetShare& t = targets[i];
    out[i].target = t.target;
    const double headroom = std::max(0.0, (t.best_us - std::max(0.0, t.floor_us)) / t.best_us);
    if (!t.converged && share_total > 0) gain[i] = share[i] / share_total * headroom;
    out[i].expected_gain = gain[i];
    if (gain[i] > 0) open.push_back(i);
  }
  std::vector<uint32_t> given(n, 0);
  uint32_t left = slots;
  if (slots >= open.size()) {
    // A target whose quota is under one slot gets exactly one and leaves the rest to the others,
    // which are then shared again, until every remaining quota is at least one slot.
    for (bool changed = true; changed && !open.empty();) {
      changed = false;
      double total = 0;
      for (size_t i : open) total += gain[i];
      std::vector<size_t> still_open;
      for (size_t i : open) {
        if (left * gain[i] / total < 1.0) {
          given[i] = 1;
          changed = true;
        } else {
          still_open.push_back(i);
        }
      }
      left -= static_cast<uint32_t>(open.size() - still_open.size());
      open = std::move(still_open);
    }
  }
  largest_remainder(gain, open, left, given);
  for (size_t i = 0; i < n; ++i) out[i].slots = given[i];
  return out;
}

// ---- Candidate ids ----

std::string candidate_id(std::string_view spec_hash, std::string_view backend,
                         std::string_view source_text,
                         const std::map<std::string, std::string>& params,
                         std::string_view toolchain_version) {
  Sha256 h;
  h.add("kiln-candidate-v1").add(spec_hash).add(backend).add(source_text);
  h.add(std::to_string(params.size()));
  for (const auto& [name, value] : params) h.add(name).add(value);
  h.add(toolchain_version);
  return h.hex();
}

}  // namespace kiln::coordinator
