// The built-in proposer's search for the nearest valid, unseen configuration (the repair of a
// mutation or crossover that breaks the constraints, switch_variant's move to another variant):
// by levels of 1, 2, ... changed parameters, each level's every combination, at most
// max_examined of them; past that bound (a large space and a parent far from what is left
// unseen) a scan of the space's valid configurations, listed once per proposer.
#include <cstdlib>
#include <functional>
#include <limits>

#include "agent/builtin_proposer.h"
#include "evaluator/evaluation.h"

namespace kiln::agent {

bool BuiltinProposer::nearest(const Params& base, const Config& from,
                              const std::vector<bool>& fixed, int max_changes, const SeenFn& seen,
                              std::mt19937_64& rng, Config* out) {
  std::vector<int> free;
  for (size_t i = 0; i < names_.size(); ++i) {
    if (!fixed[i] && values_[i].size() >= 2) free.push_back(static_cast<int>(i));
  }
  const int levels = std::min<int>(max_changes, static_cast<int>(free.size()));
  int64_t examined = 0;
  for (int k = 1; k <= levels; ++k) {
    int best_distance = std::numeric_limits<int>::max();
    std::vector<Config> best;
    bool over_budget = false;
    Config candidate = from;
    std::vector<int> subset(k);
    // Assigns every value other than from's to subset[j..k), then checks the candidate.
    std::function<void(int, int)> assign = [&](int j, int distance) {
      if (over_budget) return;
      if (j == k) {
        if (++examined > options_.max_examined) {
          over_budget = true;
          return;
        }
        if (distance > best_distance) return;
        if (!usable(base, candidate, seen)) return;
        if (distance < best_distance) {
          best_distance = distance;
          best.clear();
        }
        best.push_back(candidate);
        return;
      }
      const int pos = subset[j];
      for (int v = 0; v < static_cast<int>(values_[pos].size()); ++v) {
        if (v == from[pos]) continue;
        candidate[pos] = v;
        assign(j + 1, distance + std::abs(v - from[pos]));
      }
      candidate[pos] = from[pos];
    };
    // Every k-subset of the free positions, in lexicographic order.
    std::vector<int> idx(k);
    for (int j = 0; j < k; ++j) idx[j] = j;
    while (!over_budget) {
      for (int j = 0; j < k; ++j) subset[j] = free[idx[j]];
      assign(0, 0);
      int j = k - 1;
      while (j >= 0 && idx[j] == static_cast<int>(free.size()) - k + j) --j;
      if (j < 0) break;
      ++idx[j];
      for (int m = j + 1; m < k; ++m) idx[m] = idx[m - 1] + 1;
    }
    if (!best.empty()) {
      *out = best[pick(rng, best.size())];
      return true;
    }
    // Too many combinations at this depth (a large space, a parent far from the rest): the same
    // choice from the list of valid configurations instead.
    if (over_budget) return nearest_in_space(base, from, fixed, max_changes, seen, rng, out);
  }
  return false;
}

bool BuiltinProposer::nearest_in_space(const Params& base, const Config& from,
                                       const std::vector<bool>& fixed, int max_changes,
                                       const SeenFn& seen, std::mt19937_64& rng, Config* out) {
  if (!space_) {
    space_.emplace();
    eval::for_each_config(spec_, shape_, dtype_, [&](const Params& p) {
      Config c;
      std::string why;
      if (to_config(p, &c, &why)) space_->push_back(std::move(c));
      return true;
    });
  }
  int best_changes = std::numeric_limits<int>::max(), best_distance = best_changes;
  std::vector<const Config*> best;
  for (const Config& c : *space_) {
    int changes = 0, distance = 0;
    bool allowed = true;
    for (size_t i = 0; i < c.size() && allowed; ++i) {
      if (c[i] == from[i]) continue;
      allowed = !fixed[i];
      ++changes;
      distance += std::abs(c[i] - from[i]);
    }
    if (!allowed || changes == 0 || changes > max_changes || changes > best_changes) continue;
    if (changes == best_changes && distance > best_distance) continue;
    if (!usable(base, c, seen)) continue;
    if (changes < best_changes || distance < best_distance) {
      best_changes = changes;
      best_distance = distance;
      best.clear();
    }
    best.push_back(&c);
  }
  if (best.empty()) return false;
  *out = *best[pick(rng, best.size())];
  return true;
}

}  // namespace kiln::agent
