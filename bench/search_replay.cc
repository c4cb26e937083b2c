// Search efficiency on recorded GPU measurements, without a GPU: the real coordinator engine
// (search, proposer, acceptance, re-time, Amdahl allocation; real Dispatcher, ZeroMQ and a private
// redis-server) runs against a replay evaluator that answers each task from a recorded
// `kiln eval T --sweep --json` (every configuration of the template, timed on a GPU) and the
// target's `kiln eval T --json` seed result beside it. Repeated over many search seeds, with and
// without profile guidance, it reports how many evaluations the search needs to find a
// configuration within 5% of the best recorded one (issue #6's ablation measure) next to what
// drawing configurations in random order would need. Guidance can only differ from no guidance
// where the sweep carries bottleneck classes (`kiln eval --sweep --profile --json`).
//   build/bench/kiln_bench_search_replay SWEEP.json [SWEEP.json ...] [--seeds N] [--patience P]
//       [--within 0.05] [--targets-dir DIR]
// Times are replayed exactly (a re-time returns the recorded median), so a run is deterministic
// for its seed; a configuration the sweep lacks (the template changed since) is answered as an
// internal error and counted.
//   --reclassify: the bottleneck class of every recorded configuration is computed again from its
//   recorded metrics by this build's classifier (evaluator/profile/bottleneck.cc), with the device
//   ceilings of the "device ceilings:" line of T.sweep.log beside the sweep -- how a change to the
//   classifier or its hints is judged on old recordings without a GPU.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include "coordinator/engine.h"
#include "evaluator/ceilings.h"
#include "evaluator/profile/bottleneck.h"
#include "evaluator/result_json.h"
#include "shared/local_redis.h"
#include "shared/redis_client.h"
#include "shared/redis_store.h"
#include "shared/worker_link.h"

using namespace kiln;
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// One recorded evaluation, as the replay evaluator returns it.
struct Recorded {
  proto::Outcome outcome = proto::Outcome::kInternalError;
  double median_us = 0;
  double noise_rel = 0;
  std::string arch;
  std::string bottleneck;
  std::map<std::string, double> metrics;
};

struct Recording {
  std::string target;
  std::vector<std::string> space_keys;       // the template's parameters
  std::map<std::string, Recorded> by_params;  // "K=V,..." over space_keys
  Recorded seed;
  double best_us = 0;                         // fastest verified, seed included
  size_t within = 0;                          // configurations within the threshold of best_us
  std::vector<std::string> order;             // by_params keys in the order the sweep timed them
};

std::string key_of(const std::vector<std::string>& keys, const std::map<std::string, std::string>& params,
                   bool* complete) {
  std::string k;
  *complete = true;
  for (const std::string& name : keys) {
    auto it = params.find(name);
    if (it == params.end()) {
      *complete = false;
      return "";
    }
    k += name + "=" + it->second + ",";
  }
  return k;
}

Recorded recorded_from(const json& r) {
  Recorded out;
  const std::string outcome = r.value("outcome", "");
  for (auto o : {proto::Outcome::kVerified, proto::Outcome::kWrongAnswer, proto::Outcome::kCompileError,
                 proto::Outcome::kCrash, proto::Outcome::kTimeout, proto::Outcome::kRejected}) {
    if (outcome == proto::outcome_name(o)) out.outcome = o;
  }
  if (r.contains("timing")) {
    out.median_us = r["timing"].value("median_us", 0.0);
    out.noise_rel = r["timing"].value("noise_rel", 0.0);
  }
  out.arch = r.value("arch", "replay");
  out.bottleneck = r.value("bottleneck", "");
  if (r.contains("metrics") && r["metrics"].is_object()) {
    for (const auto& [k, v] : r["metrics"].items()) {
      if (v.is_number()) out.metrics[k] = v.get<double>();
    }
  }
  return out;
}

// The ceilings `kiln eval` printed before the sweep: "device ceilings: copy 2.96 TB/s, f16 tensor
// cores 958 TFLOP/s" (the second part only where the matrix rate was measured).
Result<eval::Ceilings> ceilings_from_log(const std::string& log_path) {
  std::ifstream in(log_path);
  if (!in) return invalid_argument(log_path + ": missing (--reclassify reads the device ceilings from the sweep's log)");
  std::string line;
  while (std::getline(in, line)) {
    const auto at = line.find("device ceilings: copy ");
    if (at == std::string::npos) continue;
    eval::Ceilings c;
    double tbs = 0, tflops = 0;
    const char* text = line.c_str() + at;
    const int n = std::sscanf(text, "device ceilings: copy %lf TB/s, f16 tensor cores %lf TFLOP/s", &tbs, &tflops);
    if (n < 1 || tbs <= 0) break;
    c.bandwidth_bytes_per_s = tbs * 1e12;
    if (n == 2) c.matrix_flops_per_s = tflops * 1e12;
    return c;
  }
  return invalid_argument(log_path + ": no 'device ceilings: copy X TB/s' line to reclassify with");
}

// This build's class of a recorded evaluation ("" where the recording has no profile).
void reclassify(Recorded* r, const eval::Ceilings& c) {
  const profile::ProfileMetrics m = profile::metrics_from_map(r->metrics);
  if (!m.has_counters() && !m.registers) return;  // never profiled: nothing to classify
  const profile::Roofline roof = profile::roofline_from(r->metrics, c.bandwidth_bytes_per_s, c.matrix_flops_per_s);
  r->bottleneck = std::string(profile::class_name(profile::classify(m, roof).cls));
}

Result<Recording> load_recording(const std::string& sweep_path, const TargetSpec& spec, double within,
                                 bool reclassify_all) {
  std::ifstream in(sweep_path);
  json sweep = json::parse(in, nullptr, false);
  if (sweep.is_discarded() || !sweep.contains("results")) {
    return invalid_argument(sweep_path + ": not the JSON of `kiln eval T --sweep --json`");
  }
  Recording rec;
  rec.target = spec.name;
  const BackendSpec* cuda = spec.backend("cuda");
  if (!cuda || !cuda->tunable) return invalid_argument(spec.name + " has no cuda template");
  for (const auto& [name, values] : cuda->tunable->space) rec.space_keys.push_back(name);
  const std::string seed_path = (fs::path(sweep_path).parent_path() / (spec.name + ".seed.json")).string();
  std::ifstream seed_in(seed_path);
  json seed = json::parse(seed_in, nullptr, false);
  if (seed.is_discarded()) return invalid_argument(seed_path + ": missing or not JSON (the seed's `kiln eval --json`)");
  rec.seed = recorded_from(seed);
  for (const json& r : sweep["results"]) {
    std::map<std::string, std::string> params = r.value("params", std::map<std::string, std::string>{});
    bool complete = false;
    const std::string k = key_of(rec.space_keys, params, &complete);
    if (complete && rec.by_params.emplace(k, recorded_from(r)).second) rec.order.push_back(k);
  }
  if (reclassify_all) {
    const std::string log_path = (fs::path(sweep_path).parent_path() / (spec.name + ".sweep.log")).string();
    KILN_ASSIGN_OR_RETURN(eval::Ceilings c, ceilings_from_log(log_path));
    reclassify(&rec.seed, c);
    for (auto& [k, r] : rec.by_params) reclassify(&r, c);
  }
  rec.best_us = rec.seed.outcome == proto::Outcome::kVerified ? rec.seed.median_us : 1e300;
  for (const auto& [k, r] : rec.by_params) {
    if (r.outcome == proto::Outcome::kVerified) rec.best_us = std::min(rec.best_us, r.median_us);
  }
  for (const auto& [k, r] : rec.by_params) {
    rec.within += r.outcome == proto::Outcome::kVerified && r.median_us <= (1 + within) * rec.best_us;
  }
  return rec;
}

// What one search did: the recorded time of each distinct evaluation, in order.
struct Trace {
  std::vector<double> times_us;  // 0 for a failed or unrecorded evaluation
  size_t unrecorded = 0;
  size_t retimes = 0;
};

// The replay evaluator: a worker thread that answers every task from the recording.
void replay_worker(zmq::context_t& ctx, const std::string& endpoint, const net::HeartbeatPolicy& heartbeat,
                   const Recording& rec, Trace* trace, const std::atomic<bool>& stop) {
  auto link = net::WorkerLink::connect(ctx, endpoint, "replay", heartbeat, "an evaluator");
  if (!link.is_ok()) return;
  auto announce = [&] {
    link->send(net::evaluator_hello("replay", "cuda", 4, "", "replay", {}));
    link->send(proto::Credit{4});
  };
  announce();
  std::set<std::string> seen;
  while (!stop.load()) {
    auto got = link->receive(5);
    if (!got.is_ok()) return;
    if (got->has_value()) {
      if (auto* t = std::get_if<proto::EvaluateTask>(&(**got).body)) {
        bool complete = false;
        const std::string k = key_of(rec.space_keys, t->params, &complete);
        const Recorded* r = &rec.seed;
        std::optional<Recorded> missing;
        if (complete) {
          auto it = rec.by_params.find(k);
          if (it != rec.by_params.end()) {
            r = &it->second;
          } else {
            missing.emplace();
            r = &*missing;
          }
        }
        proto::EvaluationResult res;
        res.task_id = t->task_id;
        res.candidate_id = t->candidate_id;
        res.arch = r->arch;
        res.outcome = r->outcome;
        res.timing.median_us = r->median_us;
        res.timing.noise_rel = r->noise_rel;
        if (r->outcome ==
            proto::Outcome::kVerified) {  // what the coordinator requires of a verified result
          for (std::string_view stage : proto::kVerifiedStages)
            res.stages.push_back({std::string(stage), true, "", 0, 1});
          res.timing.samples = 10;
        }
        res.metrics = r->metrics;
        if (missing) res.log = "not in the recorded sweep";
        if (t->profile) res.bottleneck = r->bottleneck;
        if (seen.insert(t->candidate_id).second) {
          trace->times_us.push_back(r->outcome == proto::Outcome::kVerified ? r->median_us : 0);
          trace->unrecorded += missing.has_value();
        } else {
          ++trace->retimes;
        }
        link->send(std::move(res));
        link->send(proto::Credit{1});
      }
    }
    link->keep_alive(stop, announce);
  }
}

// One search of `spec` from scratch; the trace of what it evaluated.
Result<Trace> search_once(zmq::context_t& ctx, redis::RedisClient& client, const TargetSpec& spec,
                          const Recording& rec, uint64_t seed, bool guidance, uint64_t patience) {
  KILN_RETURN_IF_ERROR(client.command({"FLUSHALL"}).status());
  redis::Store store(client);
  KILN_RETURN_IF_ERROR(store.init_schema());
  coordinator::DispatcherOptions dopts;
  dopts.heartbeat.interval_ms = 200;
  KILN_ASSIGN_OR_RETURN(auto dispatcher, coordinator::Dispatcher::create(ctx, store, dopts));
  coordinator::EngineOptions eo;
  eo.backend = "cuda";
  eo.seed = seed;
  eo.limits.max_proposals_without_gain = patience;
  eo.in_flight_per_target = 1;  // one evaluation at a time: the order is the search's own
  eo.toolchain = "replay";
  eo.profile_guidance = guidance;
  coordinator::Engine engine({spec}, *dispatcher, eo, &store);
  KILN_RETURN_IF_ERROR(engine.begin());
  Trace trace;
  std::atomic<bool> stop_worker{false}, stop_engine{false};
  std::thread worker(replay_worker, std::ref(ctx), dispatcher->endpoint(), std::cref(dopts.heartbeat), std::cref(rec), &trace,
                     std::cref(stop_worker));
  std::thread guard([&] {  // a search that never ends is a bug: cut it off after a minute
    for (int i = 0; i < 600 && !stop_worker.load(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    stop_engine.store(true);
  });
  Status ran = engine.run(stop_engine, nullptr);
  stop_worker.store(true);
  worker.join();
  guard.join();
  KILN_RETURN_IF_ERROR(ran);
  return trace;
}

// Evaluations until one within the threshold of the best recorded time (0: never).
size_t evaluations_to_within(const Trace& t, double best_us, double within) {
  for (size_t i = 0; i < t.times_us.size(); ++i) {
    if (t.times_us[i] > 0 && t.times_us[i] <= (1 + within) * best_us) return i + 1;
  }
  return 0;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> sweeps;
  int seeds = 20;
  uint64_t patience = 16;
  double within = 0.05;
  std::string targets_dir = default_targets_dir();
  bool reclassify_all = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--seeds" && i + 1 < argc) seeds = std::max(1, std::atoi(argv[++i]));
    else if (a == "--patience" && i + 1 < argc) patience = std::strtoull(argv[++i], nullptr, 10);
    else if (a == "--within" && i + 1 < argc) within = std::atof(argv[++i]);
    else if (a == "--targets-dir" && i + 1 < argc) targets_dir = argv[++i];
    else if (a == "--reclassify") reclassify_all = true;
    else if (!a.empty() && a[0] != '-') sweeps.push_back(a);
    else {
      std::fprintf(stderr,
                   "usage: %s SWEEP.json [...] [--seeds N] [--patience P] [--within F] [--targets-dir DIR] "
                   "[--reclassify]\n",
                   argv[0]);
      return 2;
    }
  }
  spdlog::set_level(spdlog::level::warn);  // the engine's per-crown lines, times seeds, drown the table
  if (sweeps.empty()) {
    std::fprintf(stderr, "give at least one recorded sweep (kiln eval T --sweep --json; T.seed.json beside it)\n");
    return 2;
  }
  const std::string dir = fs::temp_directory_path() / ("kiln-replay-" + std::to_string(getpid()));
  fs::create_directories(dir);
  LocalRedisOptions lo;
  lo.dir = dir;
  auto server = LocalRedis::start(lo);
  if (!server.is_ok()) {
    std::fprintf(stderr, "redis: %s\n", server.status().to_string().c_str());
    return 1;
  }
  redis::RedisOptions ro;
  ro.url = (*server)->url();
  auto client = redis::RedisClient::connect(ro);
  if (!client.is_ok()) return 1;
  zmq::context_t ctx;
  std::printf("%-17s %6s %6s %7s %6s | %-10s %8s %8s %7s %7s %6s\n", "target", "space", "within",
              "random", "sweep", "guidance", "median", "mean", "missed", "evals", "unrec");
  int rc = 0;
  for (const std::string& path : sweeps) {
    std::ifstream in(path);
    json head = json::parse(in, nullptr, false);
    const std::string name = head.is_discarded() ? "" : head.value("target", "");
    auto spec = load_target(targets_dir + "/" + name);
    if (!spec.is_ok()) {
      std::fprintf(stderr, "%s: %s\n", path.c_str(), spec.status().to_string().c_str());
      rc = 1;
      continue;
    }
    auto rec = load_recording(path, *spec, within, reclassify_all);
    if (!rec.is_ok()) {
      std::fprintf(stderr, "%s\n", rec.status().to_string().c_str());
      rc = 1;
      continue;
    }
    std::map<std::string, int> classes;  // configurations per recorded class
    for (const auto& [k, r] : rec->by_params) {
      if (!r.bottleneck.empty()) ++classes[r.bottleneck];
    }
    const bool any_class = !classes.empty();
    if (any_class) {
      std::string list;
      for (const auto& [c, n] : classes) list += (list.empty() ? "" : ", ") + c + " " + std::to_string(n);
      std::fprintf(stderr, "%s classes%s: %s\n", name.c_str(), reclassify_all ? " (reclassified)" : "", list.c_str());
    }
    // Random order without replacement after the seed: (N + 1) / (k + 1) draws to the first of k.
    const double n = static_cast<double>(rec->by_params.size());
    const double random = rec->seed.median_us <= (1 + within) * rec->best_us
                              ? 1.0
                              : 1.0 + (n + 1) / (static_cast<double>(rec->within) + 1);
    // An exhaustive sweep in the template's order (kiln eval --sweep, seed first): evaluations
    // until the first configuration within the threshold. It needs all of them to know it has the
    // best.
    double sweep = 1;
    if (rec->seed.median_us > (1 + within) * rec->best_us ||
        rec->seed.outcome != proto::Outcome::kVerified) {
      sweep = 1.0 + static_cast<double>(rec->order.size());
      for (size_t i = 0; i < rec->order.size(); ++i) {
        const Recorded& r = rec->by_params.at(rec->order[i]);
        if (r.outcome == proto::Outcome::kVerified && r.median_us <= (1 + within) * rec->best_us) {
          sweep = 2.0 + static_cast<double>(i);
          break;
        }
      }
    }
    for (bool guidance : {true, false}) {
      if (guidance && !any_class) continue;  // nothing to steer by: the same search as without
      std::vector<double> reached;
      size_t missed = 0, evals = 0, unrecorded = 0;
      for (int s = 1; s <= seeds; ++s) {
        Result<Trace> t = search_once(ctx, *client, *spec, *rec, static_cast<uint64_t>(s), guidance, patience);
        if (!t.is_ok()) {
          std::fprintf(stderr, "%s seed %d: %s\n", name.c_str(), s, t.status().to_string().c_str());
          rc = 1;
          break;
        }
        const size_t k = evaluations_to_within(*t, rec->best_us, within);
        if (k == 0) ++missed; else reached.push_back(static_cast<double>(k));
        evals += t->times_us.size();
        unrecorded += t->unrecorded;
      }
      double mean = 0;
      for (double r : reached) mean += r / static_cast<double>(reached.size());
      std::printf("%-17s %6zu %6zu %7.1f %6.0f | %-10s %8.1f %8.1f %7zu %7.1f %6zu\n", name.c_str(),
                  rec->by_params.size(), rec->within, random, sweep,
                  guidance ? "on" : (any_class ? "off" : "off (none)"), median(reached), mean,
                  missed, static_cast<double>(evals) / seeds, unrecorded);
      std::fflush(stdout);
    }
  }
  std::printf(
      "\nspace: recorded configurations; within: those within %.0f%% of the best recorded time; "
      "random:\n"
      "expected evaluations (seed first) in random order; sweep: evaluations an exhaustive sweep "
      "in the\n"
      "template's order (seed first) needs to reach one (and all of 1 + space to know it has the "
      "best);\n"
      "median/mean: evaluations the search needed over\n"
      "%d seeds (those that got there); missed: seeds whose search converged (patience %llu) "
      "first;\n"
      "evals: evaluations per search; unrec: proposals the sweep does not hold. guidance 'off "
      "(none)':\n"
      "the sweep has no bottleneck classes (record it with --profile), so guided = unguided.\n",
      within * 100, seeds, static_cast<unsigned long long>(patience));
  fs::remove_all(dir);
  return rc;
}
