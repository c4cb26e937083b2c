#include "agent/builtin_proposer.h"

#include <algorithm>
#include <limits>
#include <optional>
#include <set>
#include <utility>

#include "evaluator/evaluation.h"
#include "evaluator/profile/bottleneck.h"
#include "shared/text.h"

namespace kiln::agent {
namespace {

// The playbook's well-known parameter names, by default tier. GRID is a structural choice (a
// persistent grid of one CTA per SM, or one block per row/tile), not a block size: moved with the
// block sizes, guidance toward "more work in flight" doubled fused_mlp's persistent grid
// (bench/results/2026-11-24-H100-guidance-ablation.md, section 5). Split-K (SK) divides the K
// loop, so it goes with the pipeline's K-slice parameters.
const std::vector<std::vector<std::string>>& known_names() {
  static const std::vector<std::vector<std::string>> names = {
      {"BLOCK", "ROWS", "TPR", "RPB", "WARPS", "BM", "BN"},
      {"VEC", "ELEMS", "ITEMS", "UNROLL", "HINT", "WREG", "OCC", "CHUNK", "VB", "LANES", "GROUP_M",
       "RAST", "SWIZZLE"},
      {"BK", "STAGES", "WM", "WN", "HT", "TX", "UNR", "PIPE", "SK", "SPLIT_K", "SPLITK"},
      {"IMPL", "TMA", "G", "ARCH", "GRID", "VARIANT", "ALGO", "MODE", "ORDER"},
  };
  return names;
}

constexpr int kDefaultTierCount = 5;  // the four playbook tiers and "other"

std::string config_key(const std::vector<int>& c) {
  std::string key;
  key.reserve(c.size() * 2);
  for (int i : c) {
    key.push_back(static_cast<char>(i & 0xff));
    key.push_back(static_cast<char>((i >> 8) & 0xff));
  }
  return key;
}

bool chance(std::mt19937_64& rng, double p) {
  if (p <= 0) return false;
  if (p >= 1) return true;
  return static_cast<double>(rng() >> 11) * (1.0 / 9007199254740992.0) < p;
}

// Fisher-Yates with pick(): deterministic across standard libraries.
template <typename T>
void shuffle_in_place(std::vector<T>& v, std::mt19937_64& rng) {
  for (size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[pick(rng, i)]);
}

Proposal empty_proposal(std::string reason) {
  Proposal p;
  p.reason = std::move(reason);
  return p;
}

}  // namespace

size_t pick(std::mt19937_64& rng, size_t n) { return n <= 1 ? 0 : static_cast<size_t>(rng() % n); }

Tiers default_tiers(const KernelSpec& spec) {
  Tiers tiers(kDefaultTierCount);
  for (const auto& [name, values] : spec.space) {
    int tier = kDefaultTierCount - 1;
    for (int t = 0; t < static_cast<int>(known_names().size()); ++t) {
      const auto& group = known_names()[t];
      if (std::find(group.begin(), group.end(), name) != group.end()) tier = t;
    }
    tiers[tier].push_back(name);  // spec.space is sorted, so each group is too
  }
  return tiers;
}

std::string default_tier_name(int tier) {
  switch (tier) {
    case 0: return "block size";
    case 1: return "memory access";
    case 2: return "compute";
    case 3: return "advanced";
    case 4: return "other";
    default: return "tier " + std::to_string(tier);
  }
}

BuiltinProposer::BuiltinProposer(const KernelSpec& spec, Shape shape, DType dtype,
                                 BuiltinProposerOptions options)
    : spec_(spec), shape_(std::move(shape)), dtype_(dtype), options_(std::move(options)) {
  for (const auto& [name, values] : spec_.space) {
    if (values.empty()) continue;
    position_[name] = static_cast<int>(names_.size());
    names_.push_back(name);
    values_.push_back(values);
  }
  constraints_ = std::make_unique<eval::ConstraintCheck>(spec_, shape_, dtype_, names_);
  // Tiers: the given groups restricted to the space (each name once), unlisted names last.
  Tiers groups = options_.tiers.empty() ? default_tiers(spec_) : options_.tiers;
  std::set<std::string> placed;
  for (const auto& group : groups) {
    std::vector<std::string> kept;
    for (const auto& name : group) {
      if (position_.count(name) && placed.insert(name).second) kept.push_back(name);
    }
    tiers_.push_back(std::move(kept));
  }
  std::vector<std::string> rest;
  for (const auto& name : names_) {
    if (!placed.count(name)) rest.push_back(name);
  }
  if (!rest.empty()) tiers_.push_back(std::move(rest));
  if (tiers_.empty()) tiers_.emplace_back();
  tier_by_position_.assign(names_.size(), static_cast<int>(tiers_.size()) - 1);
  for (int t = 0; t < static_cast<int>(tiers_.size()); ++t) {
    for (const auto& name : tiers_[t]) tier_by_position_[position_.at(name)] = t;
  }
  // Structural parameters.
  const std::vector<std::string> structural =
      options_.structural.empty() ? default_tiers(spec_)[3] : options_.structural;
  for (const auto& name : structural) {
    if (position_.count(name) &&
        std::find(structural_.begin(), structural_.end(), name) == structural_.end()) {
      structural_.push_back(name);
    }
  }
  // Start in the first tier that has something to move.
  for (int t = 0; t < static_cast<int>(tiers_.size()); ++t) {
    if (tier_movable(t)) {
      current_tier_ = t;
      break;
    }
  }
}

std::string BuiltinProposer::tier_name(int tier) const {
  if (tier < 0) return "none";
  if (tier < static_cast<int>(options_.tier_names.size()) && !options_.tier_names[tier].empty()) {
    return options_.tier_names[tier];
  }
  if (options_.tiers.empty()) return default_tier_name(tier);
  return "";
}

std::string BuiltinProposer::tier_label(int tier) const {
  std::string name = tier_name(tier);
  return "tier " + std::to_string(tier) + (name.empty() ? "" : ": " + name);
}

int BuiltinProposer::tier_of(int position) const { return tier_by_position_[position]; }

bool BuiltinProposer::tier_movable(int tier) const {
  for (const auto& name : tiers_[tier]) {
    if (values_[position_.at(name)].size() >= 2) return true;
  }
  return false;
}

void BuiltinProposer::advance_tier() {
  stall_ = 0;
  ++tier_epoch_;
  const int n = static_cast<int>(tiers_.size());
  for (int i = 1; i <= n; ++i) {
    int t = (current_tier_ + i) % n;
    if (tier_movable(t)) {
      current_tier_ = t;
      return;
    }
  }
}

bool BuiltinProposer::to_config(const Params& p, Config* c, std::string* why) const {
  c->assign(names_.size(), 0);
  for (size_t i = 0; i < names_.size(); ++i) {
    auto it = p.find(names_[i]);
    if (it == p.end()) {
      *why = "parent has no value for template parameter " + names_[i];
      return false;
    }
    const auto& list = values_[i];
    const std::optional<int64_t> v = parse_int64(it->second);  // strict: " 4" and "4x" are not 4
    auto found = v ? std::find(list.begin(), list.end(), *v) : list.end();
    if (found == list.end()) {
      *why = "parent's " + names_[i] + "=" + log_safe(it->second, 40) +
             " is not in the template's space";
      return false;
    }
    (*c)[i] = static_cast<int>(found - list.begin());
  }
  return true;
}

Params BuiltinProposer::to_params(const Params& base, const Config& c) const {
  Params p = base;
  for (size_t i = 0; i < names_.size(); ++i) p[names_[i]] = std::to_string(values_[i][c[i]]);
  return p;
}

BuiltinProposer::~BuiltinProposer() = default;

bool BuiltinProposer::config_valid(const Config& c) {
  std::string key = config_key(c);
  auto it = valid_cache_.find(key);
  if (it != valid_cache_.end()) return it->second;
  std::vector<double> values(names_.size());
  for (size_t i = 0; i < names_.size(); ++i) values[i] = static_cast<double>(values_[i][c[i]]);
  const bool valid = constraints_->admits(values);  // a constraint that cannot be evaluated rules it out
  if (valid_cache_.size() >= (size_t{1} << 20)) valid_cache_.clear();  // huge spaces: bounded
  valid_cache_.emplace(std::move(key), valid);
  return valid;
}

bool BuiltinProposer::is_configuration(const Params& params) {
  Config c;
  std::string why;
  return to_config(params, &c, &why) && config_valid(c);
}

bool BuiltinProposer::valid(const Params& params) {
  Config c;
  std::string why;
  if (to_config(params, &c, &why)) return config_valid(c);
  Params merged = spec_.defines;
  for (const auto& [k, v] : params) merged[k] = v;
  Result<bool> ok = eval::satisfies_constraints(spec_, shape_, dtype_, merged);
  return ok.is_ok() && *ok;
}

bool BuiltinProposer::usable(const Params& base, const Config& c, const SeenFn& seen) {
  if (!config_valid(c)) return false;
  return !seen || !seen(to_params(base, c));
}

std::string BuiltinProposer::describe_changes(const Config& from, const Config& to,
                                              int skip) const {
  std::string s;
  for (size_t i = 0; i < names_.size(); ++i) {
    if (static_cast<int>(i) == skip || from[i] == to[i]) continue;
    s += (s.empty() ? "" : ", ") + names_[i] + " " + std::to_string(values_[i][from[i]]) + "->" +
         std::to_string(values_[i][to[i]]);
  }
  return s;
}

Proposal BuiltinProposer::finish(Proposal p, const Params& base, const Config& c) {
  p.params = to_params(base, c);
  if (p.operator_name == "mutate") {
    if (pending_.size() >= 65536) pending_.clear();  // reports that never came
    pending_[p.params] = Pending{tier_epoch_};
  }
  return p;
}

Proposal BuiltinProposer::mutate(const Params& parent, const SeenFn& seen, std::mt19937_64& rng) {
  return mutate_from(parent, current_tier_, 0, seen, rng);
}

Proposal BuiltinProposer::mutate_from(const Params& parent, int start_tier, int preferred,
                                      const SeenFn& seen, std::mt19937_64& rng) {
  Config base;
  std::string why;
  if (!to_config(parent, &base, &why)) return empty_proposal(why);
  if (names_.empty()) return empty_proposal("the template has no parameters");

  const bool far_first = chance(rng, options_.far_step_probability);
  const int magnitudes[2] = {far_first ? 2 : 1, far_first ? 1 : 2};
  const int n_tiers = static_cast<int>(tiers_.size());
  for (int i = 0; i < n_tiers; ++i) {
    const int t = (start_tier + i) % n_tiers;
    std::vector<int> positions;
    for (const auto& name : tiers_[t]) {
      int pos = position_.at(name);
      if (values_[pos].size() >= 2) positions.push_back(pos);
    }
    if (positions.empty()) continue;
    shuffle_in_place(positions, rng);
    // Every parameter of the tier one (or two) places along its list before any moves further.
    for (int magnitude : magnitudes) {
      for (int pos : positions) {
        // Drawn even when a direction is preferred, so the stream does not depend on guidance.
        const bool up = chance(rng, 0.5);
        // A preferred direction holds in the guided tier only, and is the only one tried there.
        const bool guided = preferred != 0 && t == start_tier;
        const int direction = guided ? preferred : (up ? 1 : -1);
        const int steps[2] = {direction * magnitude, -direction * magnitude};
        const int n_steps = guided ? 1 : 2;
        for (int s = 0; s < n_steps; ++s) {
          const int step = steps[s];
          const int to = base[pos] + step;
          if (to < 0 || to >= static_cast<int>(values_[pos].size())) continue;
          Config child = base;
          child[pos] = to;
          Proposal p;
          p.operator_name = "mutate";
          p.tier = t;
          p.description = "mutate " + describe_changes(base, child, -1) + " (" + tier_label(t) + ")";
          if (config_valid(child)) {
            if (!seen || !seen(to_params(parent, child))) return finish(std::move(p), parent, child);
            continue;  // evaluated already: the next move
          }
          std::vector<bool> fixed(names_.size(), false);
          fixed[pos] = true;
          Config repaired;
          if (nearest(parent, child, fixed, options_.repair_max_changes, seen, rng, &repaired)) {
            p.description += "; repair " + describe_changes(child, repaired, pos);
            return finish(std::move(p), parent, repaired);
          }
        }
      }
    }
  }
  // Nothing new next to the parent: the nearest unseen valid configuration anywhere.
  Config wide;
  std::vector<bool> none(names_.size(), false);
  if (nearest(parent, base, none, static_cast<int>(names_.size()), seen, rng, &wide)) {
    int tier = n_tiers;
    for (size_t i = 0; i < names_.size(); ++i) {
      if (wide[i] != base[i]) tier = std::min(tier, tier_of(static_cast<int>(i)));
    }
    Proposal p;
    p.operator_name = "mutate";
    p.tier = tier;
    p.description = "mutate " + describe_changes(base, wide, -1) + " (" + tier_label(tier) +
                    "; nearest unseen valid configuration)";
    return finish(std::move(p), parent, wide);
  }
  return empty_proposal("space exhausted around parent");
}

Proposal BuiltinProposer::crossover(const Params& first, const Params& second, const SeenFn& seen,
                                    std::mt19937_64& rng) {
  Config a, b;
  std::string why;
  if (!to_config(first, &a, &why)) return empty_proposal("first " + why);
  if (!to_config(second, &b, &why)) return empty_proposal("second " + why);
  std::vector<int> differing;
  for (size_t i = 0; i < names_.size(); ++i) {
    if (a[i] != b[i]) differing.push_back(static_cast<int>(i));
  }
  if (differing.size() < 2) {
    return empty_proposal("parents differ in fewer than two parameters: nothing to cross");
  }
  // Masks over the differing parameters (bit set: the second parent's value), neither parent
  // itself: all of them in random order for up to 16 differences, else a random sample.
  const size_t d = differing.size();
  std::vector<uint64_t> masks;
  if (d <= 16) {
    const uint64_t all = (uint64_t{1} << d) - 1;
    for (uint64_t m = 1; m < all; ++m) masks.push_back(m);
    shuffle_in_place(masks, rng);
  } else {
    for (int i = 0; i < 4096; ++i) {
      uint64_t m = 0;
      for (size_t j = 0; j < d; ++j) m |= (rng() & 1) << j;
      masks.push_back(m);
    }
  }
  for (uint64_t m : masks) {
    Config child = a;
    for (size_t j = 0; j < d; ++j) {
      if (m >> j & 1) child[differing[j]] = b[differing[j]];
    }
    if (child == a || child == b || !usable(first, child, seen)) continue;
    Proposal p;
    p.operator_name = "crossover";
    p.description = "crossover: from the second parent " + describe_changes(a, child, -1);
    return finish(std::move(p), first, child);
  }
  return empty_proposal("no new valid crossover of the parents");
}

Proposal BuiltinProposer::switch_variant(const Params& parent, const SeenFn& seen,
                                         std::mt19937_64& rng) {
  Config base;
  std::string why;
  if (!to_config(parent, &base, &why)) return empty_proposal(why);
  std::vector<int> positions;
  for (const auto& name : structural_) {
    int pos = position_.at(name);
    if (values_[pos].size() >= 2) positions.push_back(pos);
  }
  if (positions.empty()) return empty_proposal("the template has no structural parameter");
  shuffle_in_place(positions, rng);
  for (int pos : positions) {
    std::vector<int> others;
    for (int v = 0; v < static_cast<int>(values_[pos].size()); ++v) {
      if (v != base[pos]) others.push_back(v);
    }
    shuffle_in_place(others, rng);
    for (int v : others) {
      Config child = base;
      child[pos] = v;
      const int t = tier_of(pos);
      Proposal p;
      p.operator_name = "switch_variant";
      p.tier = t;
      p.description =
          "switch_variant " + describe_changes(base, child, -1) + " (" + tier_label(t) + ")";
      if (usable(parent, child, seen)) return finish(std::move(p), parent, child);
      // Invalid (or seen): the nearest unseen valid configuration of that variant.
      std::vector<bool> fixed(names_.size(), false);
      fixed[pos] = true;
      Config repaired;
      if (nearest(parent, child, fixed, static_cast<int>(names_.size()), seen, rng, &repaired)) {
        p.description += "; repair " + describe_changes(child, repaired, pos);
        return finish(std::move(p), parent, repaired);
      }
    }
  }
  return empty_proposal("no unseen valid structural variant around parent");
}

Proposal BuiltinProposer::propose(const Params& parent, const Params* second, const SeenFn& seen,
                                  std::mt19937_64& rng) {
  // Both draws are always taken, so the stream does not depend on which operator ran.
  const bool cross = chance(rng, options_.crossover_probability);
  const bool sw = chance(rng, options_.switch_probability);
  if (second != nullptr && cross) {
    Proposal p = crossover(parent, *second, seen, rng);
    if (!p.empty()) return p;
  }
  if (sw && !structural_.empty()) {
    Proposal p = switch_variant(parent, seen, rng);
    if (!p.empty()) return p;
  }
  return mutate(parent, seen, rng);
}

Guidance BuiltinProposer::guidance_for(const std::string& bottleneck) const {
  Guidance g;
  const profile::BottleneckClass cls = profile::parse_class(bottleneck);
  if (cls == profile::BottleneckClass::kUnknown || !options_.tiers.empty()) return g;
  for (const profile::Move& move : profile::hints(cls)) {
    const int tier = static_cast<int>(move.tier);
    if (tier >= static_cast<int>(tiers_.size()) || !tier_movable(tier)) continue;
    g.tier = tier;
    g.direction = move.direction;
    g.bottleneck = bottleneck;
    g.move = move.text;
    return g;
  }
  return g;
}

Proposal BuiltinProposer::propose_guided(const Params& parent, const Params* second,
                                         const std::string& bottleneck, const SeenFn& seen,
                                         std::mt19937_64& rng) {
  const Guidance g = guidance_for(bottleneck);
  if (g.tier < 0) return propose(parent, second, seen, rng);
  // The same two draws as propose(): crossover and variant switches keep their share.
  const bool cross = chance(rng, options_.crossover_probability);
  const bool sw = chance(rng, options_.switch_probability);
  if (second != nullptr && cross) {
    Proposal p = crossover(parent, *second, seen, rng);
    if (!p.empty()) return p;
  }
  const bool advanced = g.tier == static_cast<int>(profile::PlaybookTier::kAdvanced);
  Proposal p;
  if (sw && advanced && !structural_.empty()) p = switch_variant(parent, seen, rng);
  if (p.empty()) p = mutate_from(parent, g.tier, g.direction, seen, rng);
  if (!p.empty()) {
    p.description += "; guided by " + g.bottleneck + ": " + g.move;
    p.guided_by = g.bottleneck;
  }
  return p;
}

void BuiltinProposer::replay_proposal(const Params& child, const std::string& operator_name) {
  if (operator_name.rfind("mutate", 0) != 0) return;  // as finish(): only mutations count
  if (pending_.size() >= 65536) pending_.clear();
  pending_[child] = Pending{tier_epoch_};
}

void BuiltinProposer::report(const Params& child, bool accepted) {
  auto it = pending_.find(child);
  if (it == pending_.end()) return;
  const uint64_t epoch = it->second.epoch;
  pending_.erase(it);
  if (epoch != tier_epoch_) return;  // proposed while an earlier tier was current
  if (accepted) {
    stall_ = 0;
  } else if (++stall_ >= options_.tier_patience) {
    advance_tier();
  }
}

}  // namespace kiln::agent
