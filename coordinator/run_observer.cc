#include "coordinator/run_observer.h"

#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <nlohmann/json.hpp>
#include <vector>

#include "shared/build_info.h"
#include "shared/protocol.h"

namespace kiln::coordinator {
namespace {

// "searching" of "searching", "converged" of "converged: no gain in 64 proposals".
std::string state_word(const std::string& state) { return state.substr(0, state.find(':')); }

std::string number(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[64];
  auto [end, ec] =
      std::to_chars(buf, buf + sizeof buf, v);  // the shortest text that reads back as v
  return std::string(buf, ec == std::errc() ? end : buf);
}

std::string now_utc() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// Writes one metric family: HELP and TYPE once, then its samples, as the text format wants.
class Family {
 public:
  Family(std::string& out, std::string name, const char* type, const char* help)
      : out_(out), name_(std::move(name)) {
    out_ += "# HELP " + name_ + " " + help + "\n# TYPE " + name_ + " " + type + "\n";
  }
  // labels: {{"target", "reduce"}, ...}; suffix: "_bucket", "_sum", "_count" for a histogram.
  void sample(const std::vector<std::pair<const char*, std::string>>& labels, double value,
              const char* suffix = "") {
    out_ += name_ + suffix;
    if (labels.size() > 0) {
      out_ += "{";
      bool first = true;
      for (const auto& [k, v] : labels) {
        out_ += (first ? "" : ",") + std::string(k) + "=\"" + prometheus_label(v) + "\"";
        first = false;
      }
      out_ += "}";
    }
    out_ += " " + number(value) + "\n";
  }

 private:
  std::string& out_;
  std::string name_;
};

// A population's labels: its target and GPU model, and in a shape sweep its shape (without it the
// populations of one target and model would be one series written several times).
std::vector<std::pair<const char*, std::string>> unit_labels(const TargetReport& r) {
  std::vector<std::pair<const char*, std::string>> labels = {{"target", r.target},
                                                             {"gpu_model", r.gpu_model}};
  if (!r.shape.empty()) labels.emplace_back("shape", r.shape);
  return labels;
}

}  // namespace

nlohmann::json llm_use_json(const Engine& engine) {
  nlohmann::json models = nlohmann::json::array();
  for (const auto& [m, u] : engine.llm_use()) {
    models.push_back({{"model", m},
                      {"calls", u.calls},
                      {"input_tokens", u.input_tokens},
                      {"output_tokens", u.output_tokens},
                      {"cost_usd", u.cost_usd},
                      {"accepted", u.accepted}});
  }
  return models;
}

std::string prometheus_label(std::string_view value) {
  std::string out;
  for (char c : value) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '"')
      out += "\\\"";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

void RunObserver::observe(const Engine& engine, const Dispatcher& dispatcher,
                          const redis::Store* store) {
  count_new_results(engine);
  metrics_text_ = build_metrics(engine, dispatcher, store);
  status_json_ = build_status(engine, dispatcher, store);
}

void RunObserver::count_new_results(const Engine& engine) {
  const auto& results = engine.results();
  for (; results_seen_ < results.size(); ++results_seen_) {
    const proto::EvaluationResult& r = results[results_seen_];
    const Engine::ResultContext* c = engine.context_of(r.task_id);
    if (c == nullptr) continue;  // not one of this run's tasks
    ++evaluations_[{c->target, c->gpu_model, proto::outcome_name(r.outcome)}];
    Histogram& h = durations_[{c->target, c->gpu_model}];
    const double s = std::isfinite(r.wall_ms) && r.wall_ms > 0 ? r.wall_ms / 1000 : 0;
    for (size_t i = 0; i < kDurationBuckets.size(); ++i) {
      if (s <= kDurationBuckets[i]) ++h.buckets[i];
    }
    ++h.count;
    h.sum += s;
  }
}

std::string RunObserver::build_metrics(const Engine& engine, const Dispatcher& dispatcher,
                                       const redis::Store* store) const {
  std::string out;
  Family(out, "kiln_build_info", "gauge", "The kiln that runs this coordinator (always 1).")
      .sample({{"version", KILN_VERSION}, {"commit", KILN_GIT_COMMIT}}, 1);
  Family(out, "kiln_run_search_seconds", "gauge",
         "Search time the run has spent, over every coordinator process.")
      .sample({}, engine.search_seconds());
  Family(out, "kiln_run_budget_seconds", "gauge",
         "The run's time budget (0: until every target converges).")
      .sample({}, description_.budget_s);
  Family(out, "kiln_run_finished", "gauge", "1 once every target has converged, stopped or failed.")
      .sample({}, engine.finished() ? 1 : 0);

  Family evals(out, "kiln_evaluations_total", "counter",
               "Evaluation results received, by target, GPU model and outcome.");
  for (const auto& [key, n] : evaluations_) {
    const auto& [target, model, outcome] = key;
    evals.sample({{"target", target}, {"gpu_model", model}, {"outcome", outcome}},
                 static_cast<double>(n));
  }
  Family dur(out, "kiln_evaluation_duration_seconds", "histogram",
             "Wall time of an evaluation on its evaluator (compile, verify, time, profile).");
  for (const auto& [unit, h] : durations_) {
    for (size_t i = 0; i < kDurationBuckets.size(); ++i) {
      dur.sample(
          {{"target", unit.first}, {"gpu_model", unit.second}, {"le", number(kDurationBuckets[i])}},
          static_cast<double>(h.buckets[i]), "_bucket");
    }
    dur.sample({{"target", unit.first}, {"gpu_model", unit.second}, {"le", "+Inf"}},
               static_cast<double>(h.count), "_bucket");
    dur.sample({{"target", unit.first}, {"gpu_model", unit.second}}, h.sum, "_sum");
    dur.sample({{"target", unit.first}, {"gpu_model", unit.second}}, static_cast<double>(h.count),
               "_count");
  }

  const std::vector<TargetReport> reports = engine.reports();
  Family best(out, "kiln_best_time_seconds", "gauge",
              "Median time of the best verified kernel at the benchmark shape.");
  for (const auto& r : reports) {
    if (r.best_us > 0) best.sample(unit_labels(r), r.best_us * 1e-6);
  }
  Family seed(out, "kiln_seed_time_seconds", "gauge",
              "Median time of the target's seed kernel (the baseline).");
  for (const auto& r : reports) {
    if (r.seed_us > 0) seed.sample(unit_labels(r), r.seed_us * 1e-6);
  }
  Family floor(out, "kiln_best_floor_ratio", "gauge",
               "The physical floor divided by the best time (1: the best runs at the floor).");
  for (const auto& r : reports) {
    if (r.fraction_of_floor > 0) floor.sample(unit_labels(r), r.fraction_of_floor);
  }
  Family kept(out, "kiln_children_kept_total", "counter",
              "Children that beat their parent and were kept.");
  for (const auto& r : reports) kept.sample(unit_labels(r), static_cast<double>(r.accepted));
  Family state(
      out, "kiln_target_state", "gauge",
      "1 for the state each target is in (starting, searching, converged, stopped, failed).");
  for (const auto& r : reports) {
    std::vector<std::pair<const char*, std::string>> labels = unit_labels(r);
    labels.emplace_back("state", state_word(r.state));
    state.sample(labels, 1);
  }

  // Workers by role and state; every combination is written (0 included) so dashboards see zeros.
  std::map<std::pair<std::string, std::string>, int> workers = {{{"evaluator", "idle"}, 0},
                                                                {{"evaluator", "busy"}, 0},
                                                                {{"agent", "idle"}, 0},
                                                                {{"agent", "busy"}, 0}};
  for (const WorkerView& w : dispatcher.worker_views())
    ++workers[{w.role, w.in_flight > 0 ? "busy" : "idle"}];
  Family wf(out, "kiln_workers", "gauge",
            "Connected workers by role and state (busy: holds a task).");
  for (const auto& [key, n] : workers) wf.sample({{"role", key.first}, {"state", key.second}}, n);

  Family queued(out, "kiln_tasks_queued", "gauge", "Tasks waiting for a worker, by kind.");
  queued.sample({{"kind", "evaluate"}}, static_cast<double>(dispatcher.queued()));
  queued.sample({{"kind", "propose"}}, static_cast<double>(dispatcher.proposals_queued()));
  Family flight(out, "kiln_tasks_in_flight", "gauge", "Tasks a worker holds, by kind.");
  flight.sample({{"kind", "evaluate"}}, static_cast<double>(dispatcher.in_flight()));
  flight.sample({{"kind", "propose"}}, static_cast<double>(dispatcher.proposals_in_flight()));

  const DispatchStats& s = dispatcher.stats();
  Family(out, "kiln_tasks_dispatched_total", "counter",
         "Evaluation tasks sent to evaluators (re-sends included).")
      .sample({}, static_cast<double>(s.dispatched));
  Family(out, "kiln_leases_requeued_total", "counter",
         "Tasks put back in the queue because their worker died or their lease expired.")
      .sample({}, static_cast<double>(s.requeued));
  Family(out, "kiln_tasks_quarantined_total", "counter",
         "Tasks given up on as poison (they took down workers).")
      .sample({}, static_cast<double>(dispatcher.quarantined().size()));
  Family refused(out, "kiln_results_refused_total", "counter",
                 "Results not merged: late or repeated (duplicate), or not from the lease holder "
                 "or inconsistent (forged).");
  refused.sample({{"reason", "duplicate"}}, static_cast<double>(s.duplicates));
  refused.sample({{"reason", "forged"}}, static_cast<double>(s.forged));
  Family(out, "kiln_messages_malformed_total", "counter",
         "Messages from peers that did not decode.")
      .sample({}, static_cast<double>(s.malformed));
  Family(out, "kiln_workers_lost_total", "counter", "Workers that went silent or left with tasks.")
      .sample({}, static_cast<double>(s.workers_lost));
  Family(out, "kiln_workers_refused_total", "counter",
         "Evaluators refused at hello (their targets differ from the run's).")
      .sample({}, static_cast<double>(s.refused_workers));
  Family(out, "kiln_worker_faults_total", "counter",
         "Results an evaluator marked as its own fault (the task went elsewhere).")
      .sample({}, static_cast<double>(s.worker_faults));
  Family proposals(out, "kiln_proposals_total", "counter",
                   "Proposal tasks answered by agents, and failed ones.");
  proposals.sample({{"result", "answered"}}, static_cast<double>(s.proposals));
  proposals.sample({{"result", "failed"}}, static_cast<double>(s.proposals_failed));

  const auto& llm = engine.llm_use();
  Family calls(out, "kiln_llm_calls_total", "counter",
               "LLM calls agents made for this coordinator, by model.");
  for (const auto& [m, u] : llm) calls.sample({{"model", m}}, static_cast<double>(u.calls));
  Family tokens(out, "kiln_llm_tokens_total", "counter",
                "LLM tokens, by model and direction (input: prompt, output: reply).");
  for (const auto& [m, u] : llm) {
    tokens.sample({{"model", m}, {"direction", "input"}}, static_cast<double>(u.input_tokens));
    tokens.sample({{"model", m}, {"direction", "output"}}, static_cast<double>(u.output_tokens));
  }
  Family cost(out, "kiln_llm_cost_dollars_total", "counter",
              "LLM cost in US dollars at the configured prices, by model.");
  for (const auto& [m, u] : llm) cost.sample({{"model", m}}, u.cost_usd);
  Family accepted(out, "kiln_llm_accepted_total", "counter",
                  "Children an LLM model wrote that were kept, by model.");
  for (const auto& [m, u] : llm) accepted.sample({{"model", m}}, static_cast<double>(u.accepted));

  Family(out, "kiln_redis_errors_total", "counter",
         "Exchanges with Redis that failed (connection lost, timeout).")
      .sample({}, static_cast<double>(store ? store->failures() : 0));
  return out;
}

std::string RunObserver::build_status(const Engine& engine, const Dispatcher& dispatcher,
                                      const redis::Store* store) const {
  using nlohmann::json;
  json targets = json::array();
  for (const TargetReport& r : engine.reports()) {
    json t = report_json(r);
    t["speedup"] = r.best_us > 0 && r.seed_us > 0 ? r.seed_us / r.best_us : 0.0;
    t["best_params"] = r.best_params;
    targets.push_back(std::move(t));
  }
  json workers = json::array();
  for (const WorkerView& w : dispatcher.worker_views()) {
    workers.push_back({{"worker_id", w.worker_id},
                       {"role", w.role},
                       {"state", w.in_flight > 0 ? "busy" : "idle"},
                       {"node", w.node},
                       {"gpu_model", w.gpu_model},
                       {"arch", w.arch},
                       {"backends", w.backends},
                       {"capacity", w.capacity},
                       {"credits", w.credits},
                       {"in_flight", w.in_flight},
                       {"version", w.version}});
  }

  const DispatchStats& s = dispatcher.stats();
  json doc = {{"kiln_version", KILN_VERSION},
              {"updated_at", now_utc()},
              {"run",
               {{"id", engine.record().id},
                {"mode", description_.mode},
                {"backend", description_.backend},
                {"state", engine.finished() ? "finished" : "running"},
                {"search_s", engine.search_seconds()},
                {"budget_s", description_.budget_s},
                {"gpu_models", engine.gpu_models()}}},
              {"targets", targets},
              {"workers", workers},
              {"queues",
               {{"evaluate_queued", dispatcher.queued()},
                {"evaluate_in_flight", dispatcher.in_flight()},
                {"propose_queued", dispatcher.proposals_queued()},
                {"propose_in_flight", dispatcher.proposals_in_flight()},
                {"quarantined", dispatcher.quarantined().size()}}},
              {"dispatch",
               {{"dispatched", s.dispatched},
                {"results", s.results},
                {"duplicates", s.duplicates},
                {"requeued", s.requeued},
                {"malformed", s.malformed},
                {"workers_lost", s.workers_lost},
                {"forged", s.forged},
                {"worker_faults", s.worker_faults},
                {"refused_workers", s.refused_workers}}},
              {"llm", llm_use_json(engine)},
              {"redis_errors", store ? store->failures() : 0}};
  return doc.dump();
}

}  // namespace kiln::coordinator
