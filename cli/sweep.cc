// The template sweep behind `kiln eval --sweep`.
#include "cli/sweep.h"

#include <algorithm>
#include <chrono>
#include <deque>
#include <future>
#include <nlohmann/json.hpp>
#include <random>

#include "cli/stop_signal.h"
#include "evaluator/compile_pool.h"
#include "evaluator/result_json.h"

namespace kiln::cli {

std::vector<std::map<std::string, std::string>> template_configs(const KernelSpec& spec,
                                                                 const Shape& shape, DType dtype,
                                                                 uint32_t limit, uint64_t seed) {
  std::vector<std::map<std::string, std::string>> all;
  eval::for_each_config(spec, shape, dtype, [&](const std::map<std::string, std::string>& p) {
    all.push_back(p);
    return true;
  });
  if (limit > 0 && all.size() > limit) {
    std::mt19937_64 rng(seed);
    std::shuffle(all.begin(), all.end(), rng);
    all.resize(limit);
  }
  return all;
}

std::string format_params(const std::map<std::string, std::string>& params) {
  std::string s;
  for (const auto& [k, v] : params) s += (s.empty() ? "" : ",") + k + "=" + v;
  return s;
}

int run_sweep(const SweepArgs& a, eval::CandidateEvaluator& evaluator, eval::Compiler& compiler,
              FILE* progress) {
  std::vector<std::map<std::string, std::string>> configs =
      template_configs(*a.spec, a.shape, a.dtype, a.limit, a.seed);
  if (configs.empty()) {
    std::fprintf(stderr, "kiln eval --sweep: no configuration satisfies the template's constraints\n");
    return 2;
  }
  auto candidate = [&](const std::map<std::string, std::string>& params) {
    eval::CandidateSpec c = eval::candidate_of(*a.spec, a.label, params);
    if (!a.source.empty()) c.source = a.source;
    if (!a.kernel_name.empty()) c.kernel_name = a.kernel_name;
    return c;
  };
  std::fprintf(progress, "sweeping %zu configurations of %s's template (%s)%s\n", configs.size(),
               a.target->name.c_str(), std::string(dtype_name(a.dtype)).c_str(),
               a.source.empty() ? "" : (" with the kernel of " + a.label).c_str());

  // Compiles run ahead on the pool: while configuration i is verified and timed, the next ones
  // compile into the cache, so the device never waits for NVRTC.
  eval::CompilePool pool(compiler, a.compile_threads);
  std::deque<std::future<eval::CompileOutput>> in_flight;
  size_t next_prefetch = 0;
  auto prefetch_until = [&](size_t end) {
    for (; next_prefetch < std::min(end, configs.size()); ++next_prefetch) {
      auto reqs = evaluator.compile_requests(candidate(configs[next_prefetch]), a.dtype);
      if (!reqs.is_ok()) continue;
      for (auto& [d, req] : *reqs) in_flight.push_back(pool.submit(req));
    }
    while (in_flight.size() > 64) {  // bound the queue; finished futures are just dropped
      in_flight.front().wait();
      in_flight.pop_front();
    }
  };

  // SIGINT or SIGTERM (Ctrl-C, `timeout`, a scheduler's time limit) stops the sweep after the
  // configuration in progress; the table or the JSON of what was evaluated still comes out.
  StopOnSignal stop_signal;
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::pair<std::map<std::string, std::string>, proto::EvaluationResult>> results;
  for (size_t i = 0; i < configs.size() && !StopOnSignal::requested(); ++i) {
    prefetch_until(i + 1 + a.compile_threads);
    proto::EvaluationResult r = evaluator.evaluate(candidate(configs[i]), a.dtype);
    std::fprintf(progress, "  [%zu/%zu] %-28s %-14s", i + 1, configs.size(), format_params(configs[i]).c_str(),
                 proto::outcome_name(r.outcome).c_str());
    if (r.outcome == proto::Outcome::kVerified) {
      std::fprintf(progress, " %10.2f us", r.timing.median_us);
      if (r.metrics.count("fraction_of_floor")) {
        std::fprintf(progress, "  %5.1f%% of floor", 100 * r.metrics.at("fraction_of_floor"));
      }
    }
    auto metric = [&](const char* k) { return r.metrics.count(k) ? r.metrics.at(k) / 1000 : 0.0; };
    if (r.outcome == proto::Outcome::kVerified) {
      std::fprintf(progress, "  [%.2f s: load %.2f, verify %.2f, time %.2f]\n", r.wall_ms / 1000,
                   metric("prepare_ms"), metric("verified_at_ms") - metric("prepare_ms"),
                   r.wall_ms / 1000 - metric("verified_at_ms"));
    } else {
      std::fprintf(progress, "  [%.2f s] %s\n", r.wall_ms / 1000, r.log.substr(0, r.log.find('\n')).c_str());
    }
    std::fflush(progress);
    results.emplace_back(configs[i], std::move(r));
  }
  const double wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const bool interrupted = results.size() < configs.size();
  if (interrupted) {
    std::fprintf(progress, "stopped by a signal after %zu of %zu configurations; %s follow\n",
                 results.size(), configs.size(), a.json ? "their results" : "the ranking of those");
    std::fflush(progress);
  }

  std::vector<size_t> order;
  for (size_t i = 0; i < results.size(); ++i) {
    if (results[i].second.outcome == proto::Outcome::kVerified) order.push_back(i);
  }
  std::sort(order.begin(), order.end(), [&](size_t x, size_t y) {
    return results[x].second.timing.median_us < results[y].second.timing.median_us;
  });
  const double per_hour = results.size() / wall_s * 3600.0;
  if (a.json) {
    nlohmann::json j = {{"target", a.target->name},
                        {"dtype", dtype_name(a.dtype)},
                        {"configurations", results.size()},
                        {"verified", order.size()},
                        {"wall_s", wall_s},
                        {"evaluations_per_hour", per_hour},
                        {"planned", configs.size()},
                        {"interrupted", interrupted}};
    j["results"] = nlohmann::json::array();
    for (const auto& [params, r] : results) {
      nlohmann::json e = eval::result_to_json(r);
      e["params"] = params;
      j["results"].push_back(e);
    }
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    std::printf("\n%zu of %zu configurations verified in %.1f s (%.0f evaluations per hour)\n",
                order.size(), results.size(), wall_s, per_hour);
    for (size_t k = 0; k < std::min<size_t>(order.size(), 10); ++k) {
      const auto& [params, r] = results[order[k]];
      std::printf("%2zu. %-30s %10.2f us", k + 1, format_params(params).c_str(), r.timing.median_us);
      if (r.metrics.count("fraction_of_floor")) {
        std::printf("  %5.1f%% of floor", 100 * r.metrics.at("fraction_of_floor"));
      }
      std::printf("\n");
    }
  }
  return order.empty() ? 1 : 0;
}

}  // namespace kiln::cli
