// Agents and the seed: a proposal agent is asked about any parent, the seed included, so a target
// whose template never beats its seed still reaches the agents (an LLM proposer would otherwise
// never see it); and a parent the agents have nothing new about is not asked about again and
// again at once. Real Dispatcher, sockets and redis-server; the real built-in agent daemon
// (run_agent_daemon) in a thread; a synthetic evaluator through the real worker link.
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "agent/agent_daemon.h"
#include "coordinator/engine.h"
#include "coordinator/target_search.h"
#include "tests/coordinator/describe.h"
#include "tests/coordinator/engine_fixture.h"
#include "tests/support/synthetic_worker.h"

namespace kiln::coordinator {
namespace {

using Clock = std::chrono::steady_clock;

class EngineAgentTest : public EngineFixture {
 protected:
  void SetUp() override { ASSERT_NO_FATAL_FAILURE(start_store()); }

  // reduce in a folder of its own, its cpu template's UNROLL list replaced by `unroll`.
  std::string reduce_with(const std::vector<int>& unroll) {
    std::filesystem::copy(testing::builtin_targets_dir() + "/reduce", dir_.path() + "/reduce",
                          std::filesystem::copy_options::recursive);
    std::ifstream in(dir_.path() + "/reduce/target.json");
    nlohmann::json spec = nlohmann::json::parse(in);
    spec["backends"]["cpu"]["template"]["params"]["UNROLL"] = unroll;
    std::ofstream(dir_.path() + "/reduce/target.json") << spec.dump(2);
    return dir_.path();
  }

  // A search of targets_ with a built-in agent (its targets from `targets_dir`) connected before
  // it starts, on one synthetic evaluator for which the seed is the fastest kernel there is (no
  // child is ever kept: every parent is the seed) and each evaluation takes `eval_ms`.
  // Returns the agents' statistics and the final reports.
  void search(const std::string& targets_dir, int eval_ms, AgentStats* stats,
              std::vector<TargetReport>* reports) {
    auto d = test_dispatcher(ctx_, *store_);
    ASSERT_NE(d, nullptr);
    std::atomic<bool> agent_stop{false};
    agent::AgentOptions a;
    a.connect = d->endpoint();
    a.targets_dir = targets_dir;
    a.worker_id = "agent-under-test";
    a.heartbeat.interval_ms = 50;
    Status agent_status;
    std::thread agent_thread([&] { agent_status = agent::run_agent_daemon(a, agent_stop); });
    struct Join {  // the agent stops on every way out, a failed assertion's too
      std::atomic<bool>& stop;
      std::thread& t;
      ~Join() {
        stop.store(true);
        t.join();
      }
    } join{agent_stop, agent_thread};
    const auto give_up = Clock::now() + std::chrono::seconds(10);
    while (d->agents() == 0 && Clock::now() < give_up) ASSERT_TRUE(d->poll(10).is_ok());
    ASSERT_EQ(d->agents(), 1u) << "the agent did not join";

    EngineOptions eo;
    eo.backend = "cpu";
    eo.seed = 3;
    eo.limits.max_proposals_without_gain = 6;
    eo.in_flight_per_target = 2;
    eo.toolchain = "kiln-test";
    Engine engine(targets_, *d, eo, &*store_);
    std::atomic<bool> stop{false};
    testing::SyntheticWorkerOptions wo;
    wo.stop_after = &stop;
    wo.time_fn = [eval_ms](const proto::EvaluateTask& t) {
      std::this_thread::sleep_for(std::chrono::milliseconds(eval_ms));
      return t.kind == proto::kKindSeed ? 100.0 : 300.0;
    };
    testing::SyntheticWorker w(ctx_, d->endpoint(), wo);
    Status ran = run_engine(engine, stop, 30);
    ASSERT_TRUE(ran.is_ok()) << ran.to_string();
    ASSERT_TRUE(engine.finished());
    *stats = engine.agent_stats();
    *reports = engine.reports();
  }

  testing::TempDir dir_;
};

TEST_F(EngineAgentTest, AnAgentIsAskedAboutTheSeedWhenNoTemplateChildBeatsIt) {
  // 12 configurations, so that the agent's draws and the engine's own template children do not
  // simply meet on the same few; evaluations of 20 ms, so that its answers arrive in time.
  const std::string targets = reduce_with({1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 14, 16});
  ASSERT_NE(add_target(targets + "/reduce"), nullptr);
  AgentStats s;
  std::vector<TargetReport> reports;
  ASSERT_NO_FATAL_FAILURE(search(targets, 20, &s, &reports));
  EXPECT_GT(s.asked, 0u);
  EXPECT_EQ(s.failed, 0u) << "the agent could not answer about the seed";
  EXPECT_GT(s.children, 0u) << "asked " << s.asked << ", answered " << s.answered << ", duplicates "
                            << s.duplicates;
  EXPECT_EQ(s.rejected, 0u);
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_EQ(reports[0].best_label, "seed") << describe(reports[0]);
}

TEST_F(EngineAgentTest, AParentAgentsHaveNothingNewAboutIsAskedAboutOnlyAsTheSearchMovesOn) {
  // The built-in template's three configurations are soon spent; the last evaluations take 200 ms
  // each, in which an agent answering "every configuration was proposed" would otherwise be asked
  // about the seed again on every round trip.
  ASSERT_NE(add_target("reduce"), nullptr);
  AgentStats s;
  std::vector<TargetReport> reports;
  ASSERT_NO_FATAL_FAILURE(search(testing::builtin_targets_dir(), 200, &s, &reports));
  EXPECT_GT(s.asked, 0u);
  // The seed and three configurations are all the candidates there are: at most one answer with
  // a child per configuration, and after an empty one, the next ask waits for 2, then 4 more.
  EXPECT_LE(s.asked, 6u) << "failed " << s.failed << ", duplicates " << s.duplicates
                         << ", children " << s.children;
}

}  // namespace
}  // namespace kiln::coordinator
