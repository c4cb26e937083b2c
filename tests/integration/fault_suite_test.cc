// The fault suite: one farm of real processes on the cpu backend (a persistent redis-server, a
// `kiln coordinator`, three `kiln evaluator`s; tests/support/fault_farm.h) put through, at random
// moments of one search:
// - evaluators killed with SIGKILL and started again (as an operator's supervisor would);
// - the coordinator killed with SIGKILL and started again with --resume on the same endpoint
//   (the evaluators stay up, announce themselves again and keep working);
// - Redis killed with SIGKILL and started again from its AOF a few seconds later (the
//   coordinator waits it out: --redis-retry);
// - an evaluator stopped (SIGSTOP) for longer than its liveness, then continued: the coordinator
//   drops it and requeues its tasks; it must announce itself again and answer tasks;
// - a rogue peer sending garbage and forged `verified` 1 us results for tasks it reads from Redis,
//   and an impersonator saying hello with an evaluator's worker id;
// - an evaluator whose copy of a target differs: refused, it exits non-zero, judges nothing.
// Then: the run completes (summary.json, every target converged or stopped, exit 0 for the
// coordinator and for every evaluator on the `finished` bye), every result is in results.jsonl,
// the search log and Redis exactly once, and no forged result is anywhere.
// Counts come from the environment (KILN_FAULTS_*; defaults sized for CI on 2 cores); the line
// "fault suite: ..." on stdout says what was done (bench/fault_nightly.sh collects it).
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <regex>
#include <thread>

#include "shared/protocol.h"
#include "shared/redis_keys.h"
#include "shared/redis_store.h"
#include "shared/transport.h"
#include "shared/worker_link.h"
#include "tests/support/fault_farm.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using testing::FaultFarm;

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : fallback;
}

struct Counts {
  int evaluator_kills = env_int("KILN_FAULTS_EVALUATOR_KILLS", 100);
  int coordinator_kills = env_int("KILN_FAULTS_COORDINATOR_KILLS", 20);
  int redis_restarts = env_int("KILN_FAULTS_REDIS_RESTARTS", 5);
  int redis_down_s = env_int("KILN_FAULTS_REDIS_DOWN_S", 5);
  int stop_s = 6;  // SIGSTOP: twice the coordinator's silence limit (3 x 1 s heartbeats)
  // Wall time over which the faults are spread.
  int window_s =
      env_int("KILN_FAULTS_WINDOW_S",
              std::max({60, evaluator_kills * 5 / 2, coordinator_kills * 10, redis_restarts * 12}));
  unsigned seed =
      static_cast<unsigned>(env_int("KILN_FAULTS_SEED", static_cast<int>(std::random_device{}())));
};

enum class Fault { kEvaluatorKill, kCoordinatorKill, kRedisRestart, kStop, kRogue, kMismatch };
struct Planned {
  double at_s;
  Fault fault;
};

// Events spread over the window: evaluator kills at uniform random moments, the others one per
// slot of the window with a random offset inside it.
std::vector<Planned> plan(const Counts& c, std::mt19937& rng) {
  std::vector<Planned> p;
  std::uniform_real_distribution<double> any(3, c.window_s), within(0.1, 0.9);
  for (int i = 0; i < c.evaluator_kills; ++i) p.push_back({any(rng), Fault::kEvaluatorKill});
  auto slots = [&](int n, Fault f) {
    for (int i = 0; i < n; ++i) p.push_back({c.window_s * (i + within(rng)) / n, f});
  };
  slots(c.coordinator_kills, Fault::kCoordinatorKill);
  slots(c.redis_restarts, Fault::kRedisRestart);
  p.push_back({c.window_s * 0.25, Fault::kStop});
  p.push_back({c.window_s * 0.5, Fault::kRogue});
  p.push_back({c.window_s * 0.75, Fault::kMismatch});
  std::sort(p.begin(), p.end(), [](const Planned& a, const Planned& b) { return a.at_s < b.at_s; });
  return p;
}

// A forged verified result: every stage passed, 1 us.
proto::EvaluationResult forged(const std::string& task, const std::string& cand) {
  proto::EvaluationResult r;
  r.task_id = task;
  r.candidate_id = cand;
  r.arch = "cpu/x86_64";
  r.outcome = proto::Outcome::kVerified;
  for (auto stage : proto::kVerifiedStages)
    r.stages.push_back({std::string(stage), true, "", 0, 1});
  r.timing.median_us = 1.0;
  r.timing.min_us = 1.0;
  r.timing.samples = 100;
  return r;
}

// The tasks leased in Redis now, as (task id, candidate id).
std::vector<std::pair<std::string, std::string>> leased_tasks(const FaultFarm& farm) {
  std::vector<std::pair<std::string, std::string>> tasks;
  Result<redis::RedisClient> client = farm.redis_client();
  if (!client.is_ok()) return tasks;
  redis::Store store(*client);
  Result<redis::Reply> ids = client->command({"ZRANGE", redis::keys::inflight(), "0", "-1"});
  if (!ids.is_ok()) return tasks;
  for (const auto& id : ids->elements) {
    Result<std::optional<std::string>> payload = store.lease_payload(id.str);
    if (!payload.is_ok() || !*payload) continue;
    Result<proto::Envelope> env = proto::decode(**payload);
    if (auto* t = env.is_ok() ? std::get_if<proto::EvaluateTask>(&env->body) : nullptr) {
      tasks.emplace_back(t->task_id, t->candidate_id);
    }
  }
  return tasks;
}

struct RogueTally {
  int forged_sent = 0, garbage_sent = 0, impersonations = 0;
};

// Error codes the coordinator sent `dealer` within `ms`.
std::vector<std::string> error_codes(net::DealerSocket& dealer, int ms) {
  std::vector<std::string> codes;
  const auto deadline = Clock::now() + std::chrono::milliseconds(ms);
  while (Clock::now() < deadline) {
    Result<std::optional<std::string>> got = dealer.receive(100);
    if (!got.is_ok() || !*got) continue;
    Result<proto::Envelope> env = proto::decode(**got);
    if (auto* e = env.is_ok() ? std::get_if<proto::Error>(&env->body) : nullptr)
      codes.push_back(e->code);
  }
  return codes;
}

// The rogue: garbage, forged results before and after a hello of its own, then a hello with a
// real evaluator's worker id and forged results under it. Nothing it sends may count.
void run_rogue(FaultFarm& farm, RogueTally& tally) {
  zmq::context_t ctx;
  proto::IdGenerator ids("rogue");
  auto send = [&](net::DealerSocket& d, proto::Message m) {
    EXPECT_TRUE(d.send(proto::encode({proto::kProtocolVersion, ids.next(), std::move(m)})).is_ok());
  };
  auto forge_all = [&](net::DealerSocket& d) {
    std::vector<std::pair<std::string, std::string>> tasks = leased_tasks(farm);
    const int n = static_cast<int>(tasks.size());
    for (int i = 0; i < 3; ++i)
      tasks.emplace_back("forged-task-" + std::to_string(i), "forged-cand-" + std::to_string(i));
    for (int i = 0; i < 20; ++i)
      tasks.emplace_back("t-" + std::to_string(i), "c-" + std::to_string(i));
    for (const auto& [task, cand] : tasks) {
      send(d, forged(task, cand));
      ++tally.forged_sent;
    }
    return n;
  };
  Result<net::DealerSocket> rogue =
      net::DealerSocket::connect(ctx, farm.endpoint(), {}, "rogue-peer");
  ASSERT_TRUE(rogue.is_ok()) << rogue.status().to_string();
  ASSERT_TRUE(rogue->send(std::string("\xc1\x00garbage", 9)).is_ok());
  ASSERT_TRUE(rogue->send(std::string(1000, '\xff')).is_ok());
  tally.garbage_sent += 2;
  std::vector<std::string> codes = error_codes(*rogue, 3000);
  EXPECT_EQ(std::count(codes.begin(), codes.end(), std::string(proto::kErrorBadMessage)), 2)
      << "garbage not answered";

  // Before any hello: every result is from an unknown peer.
  const int leased = forge_all(*rogue);
  codes = error_codes(*rogue, 3000);
  EXPECT_GE(std::count(codes.begin(), codes.end(), std::string(proto::kErrorUnknownPeer)), 1);
  // With a hello of its own (and the right spec hashes), but no task leased to it.
  send(*rogue, net::evaluator_hello("rogue-1", "cpu", 2, "", "cpu/x86_64", farm.spec_hashes()));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  forge_all(*rogue);

  // The impersonator: a new connection that says it is evaluator 1.
  const size_t ev1_log = fs::file_size(farm.evaluator_log(1));
  Result<net::DealerSocket> twin =
      net::DealerSocket::connect(ctx, farm.endpoint(), {}, "impersonator");
  ASSERT_TRUE(twin.is_ok());
  send(*twin,
       net::evaluator_hello(farm.worker_id(1), "cpu", 2, "", "cpu/x86_64", farm.spec_hashes()));
  ++tally.impersonations;
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  forge_all(*twin);
  // The real evaluator 1 is told it is unknown and announces itself again (or, restarted a
  // moment ago, says its first hello after the impersonator's).
  auto took_back = [&] {
    const std::string log = testing::read_text(farm.evaluator_log(1), ev1_log);
    return log.find("announcing again") != std::string::npos ||
           log.find("connected to") != std::string::npos;
  };
  const auto deadline = Clock::now() + std::chrono::seconds(15);
  while (Clock::now() < deadline && !took_back())
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_TRUE(took_back()) << "evaluator 1 did not take its worker id back from the impersonator";
  std::printf("rogue: %d leased task(s) read from Redis and forged\n", leased);
}

// Task ids a log says were answered after byte `from` ("task T: OUTCOME in N ms").
std::vector<std::string> answered_tasks(const std::string& log, size_t from) {
  static const std::regex line(R"(task (\S+): [a-z_]+ in [0-9]+ ms)");
  std::vector<std::string> tasks;
  const std::string text = testing::read_text(log, from);
  for (auto it = std::sregex_iterator(text.begin(), text.end(), line); it != std::sregex_iterator();
       ++it) {
    tasks.push_back((*it)[1]);
  }
  return tasks;
}

TEST(FaultSuite, TheFarmCompletesItsRunThroughKillsRestartsStopsAndForgeries) {
  const Counts c;
  std::mt19937 rng(c.seed);
  testing::FarmOptions fo;
  // Search time for the window and a margin for the last faults (a Redis outage or the stop
  // counts as search time; the coordinator's own down time does not): the run must not end
  // before the last fault, and every second past it is CI time spent waiting.
  fo.budget_s = c.window_s + std::max(c.redis_down_s, c.stop_s) + 30;
  // Configurations enough that the search never runs out of them first: a farm of three cpu
  // evaluators makes under one evaluation a second, and every target has at least 3 x PAD of them
  // (a nightly run of 2500 s converged at 2222 s on 200 values: it had seen every one).
  fo.pad_values = std::max<uint32_t>(fo.pad_values, static_cast<uint32_t>(fo.budget_s));
  std::printf("fault suite: seed %u (KILN_FAULTS_SEED), window %d s, budget %d s\n", c.seed,
              c.window_s, fo.budget_s);
  const auto t0 = Clock::now();
  FaultFarm farm(fo);
  ASSERT_EQ(farm.start(), "");

  // Faults, in order.
  int ev_kills = 0, coord_kills = 0, redis_restarts = 0, stops = 0, refused = 0;
  RogueTally rogue;
  int stopped = -1;             // the SIGSTOPped evaluator, spared from kills until it answered
  size_t stopped_log_from = 0;  // its log's size at SIGCONT
  std::vector<std::string> stopped_answers;
  size_t coord_log_at_stop = 0;
  const std::string mismatch_log = farm.dir().file("evaluator-mismatch.log");
  for (const Planned& p : plan(c, rng)) {
    while (std::chrono::duration<double>(Clock::now() - t0).count() < p.at_s) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ASSERT_TRUE(farm.coordinator_running())
        << "the run ended before the faults were done (raise KILN_FAULTS_WINDOW_S): "
        << farm.coordinator_exit()->describe() << "\n"
        << testing::read_text(farm.coordinator_log());
    if (stopped >= 0) {
      stopped_answers = answered_tasks(farm.evaluator_log(stopped), stopped_log_from);
      if (stopped_answers.size() >= 3) stopped = -1;  // it is back: fair game again
    }
    switch (p.fault) {
      case Fault::kEvaluatorKill: {
        int i = std::uniform_int_distribution<int>(0, farm.evaluators() - 1)(rng);
        if (i == stopped) i = (i + 1) % farm.evaluators();
        ASSERT_EQ(farm.kill_and_restart_evaluator(i), "");
        ++ev_kills;
        break;
      }
      case Fault::kCoordinatorKill:
        ASSERT_EQ(farm.kill_and_resume_coordinator(), "");
        ++coord_kills;
        break;
      case Fault::kRedisRestart:
        ASSERT_EQ(farm.kill_and_restart_redis(std::chrono::seconds(c.redis_down_s)), "");
        ++redis_restarts;
        break;
      case Fault::kStop: {
        stopped = 0;
        coord_log_at_stop = fs::file_size(farm.coordinator_log());
        farm.signal_evaluator(stopped, SIGSTOP);
        std::this_thread::sleep_for(std::chrono::seconds(c.stop_s));
        stopped_log_from = fs::file_size(farm.evaluator_log(stopped));
        farm.signal_evaluator(stopped, SIGCONT);
        ++stops;
        // The coordinator dropped it while it was stopped.
        EXPECT_NE(testing::read_text(farm.coordinator_log(), coord_log_at_stop)
                      .find("worker " + farm.worker_id(0) + " is silent"),
                  std::string::npos);
        break;
      }
      case Fault::kRogue:
        run_rogue(farm, rogue);
        ASSERT_FALSE(HasFatalFailure());
        break;
      case Fault::kMismatch: {
        // Its own copy of the targets, with another benchmark shape for rmsnorm.
        const std::string bad = farm.dir().file("targets-mismatch");
        fs::copy(farm.targets_dir(), bad, fs::copy_options::recursive);
        std::ifstream in(bad + "/rmsnorm/target.json");
        nlohmann::json spec = nlohmann::json::parse(in);
        spec["backends"]["cpu"]["benchmark"] = {{"M", 128}, {"N", 256}};
        std::ofstream(bad + "/rmsnorm/target.json") << spec.dump(2);
        Result<ChildProcess> ev = farm.start_evaluator("fault-mismatch", bad, mismatch_log);
        ASSERT_TRUE(ev.is_ok());
        const auto deadline = Clock::now() + std::chrono::seconds(30);
        while (ev->running() && Clock::now() < deadline)
          std::this_thread::sleep_for(std::chrono::milliseconds(50));
        ASSERT_FALSE(ev->running()) << "a mismatched evaluator was not refused:\n"
                                    << testing::read_text(mismatch_log);
        EXPECT_FALSE(ev->exit_status()->ok()) << testing::read_text(mismatch_log);
        EXPECT_NE(testing::read_text(mismatch_log).find("differs from the run's"),
                  std::string::npos)
            << testing::read_text(mismatch_log);
        ++refused;
        break;
      }
    }
  }
  const double faults_s = std::chrono::duration<double>(Clock::now() - t0).count();

  // The run ends by its budget; every evaluator leaves on the coordinator's `finished` bye.
  const auto end_deadline = Clock::now() + std::chrono::seconds(fo.budget_s + 180);
  while (farm.coordinator_running() && Clock::now() < end_deadline) {
    if (stopped >= 0)
      stopped_answers = answered_tasks(farm.evaluator_log(stopped), stopped_log_from);
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  ASSERT_FALSE(farm.coordinator_running()) << "the run did not end within its budget and grace";
  EXPECT_TRUE(farm.coordinator_exit()->ok()) << farm.coordinator_exit()->describe();
  const std::vector<std::optional<ExitStatus>> evs = farm.wait_evaluators(std::chrono::seconds(60));
  for (size_t i = 0; i < evs.size(); ++i) {
    EXPECT_TRUE(evs[i] && evs[i]->ok())
        << "evaluator " << i << ": "
        << (evs[i] ? evs[i]->describe() : "still running after the run ended");
  }
  const double total_s = std::chrono::duration<double>(Clock::now() - t0).count();
  if (stops > 0) {
    stopped_answers = answered_tasks(farm.evaluator_log(0), stopped_log_from);
    EXPECT_FALSE(stopped_answers.empty())
        << "the evaluator stopped with SIGSTOP answered no task after SIGCONT";
    EXPECT_NE(testing::read_text(farm.coordinator_log(), coord_log_at_stop)
                  .find("worker " + farm.worker_id(0) + " joined"),
              std::string::npos)
        << "the evaluator stopped with SIGSTOP did not announce itself again";
  }

  std::ifstream sin(farm.out() + "/summary.json");
  nlohmann::json summary = nlohmann::json::parse(sin, nullptr, false);
  ASSERT_TRUE(summary.is_array() && summary.size() == 2)
      << testing::read_text(farm.coordinator_log());
  for (const auto& t : summary) {
    const std::string state = t.value("state", "");
    EXPECT_TRUE(state.rfind("converged", 0) == 0 || state.rfind("stopped", 0) == 0) << t.dump();
    EXPECT_GT(t.value("evaluations", 0), 1) << t.dump();
  }

  Result<testing::FarmResults> r = testing::read_farm_results(farm.out(), farm.redis_url());
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  size_t duplicates = 0;
  for (const auto& [task, n] : r->per_task) {
    EXPECT_EQ(n, 1) << "task " << task << " in results.jsonl " << n << " times";
    duplicates += n > 1;
  }
  for (const auto& [cand, n] : r->per_candidate) {
    EXPECT_LE(n, 2) << "candidate " << cand
                    << " (a crowned best's re-time is the one second result)";
    duplicates += n > 2;
  }
  for (const auto& [task, n] : r->logged_results) {
    EXPECT_EQ(n, 1) << "task " << task << " has " << n << " results in the search log";
    EXPECT_TRUE(r->per_task.count(task))
        << "task " << task << " is in the search log, not in results.jsonl";
    duplicates += n > 1;
  }
  for (const auto& [task, n] : r->per_task) {
    EXPECT_TRUE(r->logged_results.count(task))
        << "task " << task << " is in results.jsonl, not in the search log";
  }
  // Every verified result is stored in Redis once per (candidate, arch), and every stored one was
  // merged into the run.
  std::set<std::string> stored_candidates;
  for (const auto& [key, res] : r->stored) stored_candidates.insert(res.candidate_id);
  for (const auto& cand : r->verified_candidates) {
    EXPECT_TRUE(stored_candidates.count(cand))
        << "verified candidate " << cand << " has no kiln:result key";
  }
  for (const auto& cand : stored_candidates) {
    EXPECT_TRUE(r->per_candidate.count(cand))
        << "kiln:result of " << cand << " is not in results.jsonl";
  }
  for (const auto& f : r->forged) ADD_FAILURE() << "forged result accepted: " << f;
  EXPECT_FALSE(r->verified_candidates.empty());
  // The evaluator that was stopped and continued had results accepted afterwards.
  if (stops > 0) {
    EXPECT_TRUE(std::any_of(stopped_answers.begin(), stopped_answers.end(),
                            [&](const std::string& t) { return r->per_task.count(t) > 0; }))
        << "none of the " << stopped_answers.size()
        << " task(s) evaluator 0 answered after SIGCONT was merged";
  }
  EXPECT_EQ(testing::count_lines_with(testing::read_text(mismatch_log), "evaluating task"), 0u);

  const std::string coord = testing::read_text(farm.coordinator_log());
  std::printf(
      "fault suite: %d evaluator kills, %d coordinator kill-and-resumes, %d redis restarts of %d "
      "s, %d SIGSTOP of %d s, "
      "%d forged results + %d garbage messages from a rogue, %d impersonation(s), %d mismatched "
      "evaluator(s) refused: "
      "run complete, %zu results (%zu verified), %zu duplicates, %zu forged; the coordinator "
      "refused %zu result(s), "
      "told %zu message(s) to say hello first, dropped %zu silent worker(s); faults over %.0f s, "
      "wall %.0f s\n",
      ev_kills, coord_kills, redis_restarts, c.redis_down_s, stops, c.stop_s, rogue.forged_sent,
      rogue.garbage_sent, rogue.impersonations, refused, r->lines, r->verified_candidates.size(),
      duplicates, r->forged.size(), testing::count_lines_with(coord, "refusing a result"),
      testing::count_lines_with(coord, "telling it to say hello"),
      testing::count_lines_with(coord, " is silent; its"), faults_s, total_s);
  std::fflush(stdout);
}

}  // namespace
}  // namespace kiln
