// Model bandit: see model_bandit.h. Beta draws come from two Gamma draws (X / (X + Y)).
#include "agent/llm/model_bandit.h"

#include <algorithm>

namespace kiln::agent::llm {
namespace {

double beta_draw(double a, double b, std::mt19937_64& rng) {
  std::gamma_distribution<double> ga(a, 1.0), gb(b, 1.0);
  const double x = ga(rng), y = gb(rng);
  return x + y > 0 ? x / (x + y) : 0.5;
}

}  // namespace

ModelBandit::ModelBandit(std::vector<std::string> names, double min_cost_per_call_usd, uint64_t seed)
    : min_cost_per_call_usd_(min_cost_per_call_usd), rng_(seed) {
  for (auto& n : names) stats_.push_back(ModelStats{std::move(n)});
}

size_t ModelBandit::pick() {
  std::lock_guard<std::mutex> lock(mu_);
  for (size_t i = 0; i < stats_.size(); ++i) {
    if (stats_[i].proposals == 0 && stats_[i].calls == 0 && stats_[i].call_errors == 0) return i;
  }
  size_t best = 0;
  double best_score = -1;
  for (size_t i = 0; i < stats_.size(); ++i) {
    const ModelStats& s = stats_[i];
    const double tries = static_cast<double>(std::max<uint64_t>(s.proposals + s.rejected + s.call_errors, 1));
    const double wins = static_cast<double>(std::min<uint64_t>(s.accepted, static_cast<uint64_t>(tries)));
    const double cost = std::max(s.cost_usd / tries, min_cost_per_call_usd_);
    const double score = beta_draw(1 + wins, 1 + tries - wins, rng_) / cost;
    if (score > best_score) {
      best_score = score;
      best = i;
    }
  }
  return best;
}

std::vector<ModelStats> ModelBandit::snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

nlohmann::json ModelBandit::to_json() const {
  nlohmann::json models = nlohmann::json::array();
  for (const ModelStats& s : snapshot()) {
    models.push_back({{"name", s.name}, {"calls", s.calls}, {"call_errors", s.call_errors},
                      {"proposals", s.proposals}, {"repairs", s.repairs}, {"rejected", s.rejected},
                      {"duplicates", s.duplicates}, {"accepted", s.accepted}, {"failed", s.failed},
                      {"input_tokens", s.input_tokens}, {"output_tokens", s.output_tokens},
                      {"cost_usd", s.cost_usd},
                      {"accepted_per_usd", s.cost_usd > 0 ? s.accepted / s.cost_usd : 0.0}});
  }
  return {{"models", models}};
}

}  // namespace kiln::agent::llm
