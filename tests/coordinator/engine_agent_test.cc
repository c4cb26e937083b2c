// Agents and the seed: a proposal agent is asked about any parent, the seed included, so a target
// whose template never beats its seed still reaches the agents (an LLM proposer would otherwise
// never see it). Real Dispatcher, sockets and redis-server; the real built-in agent daemon
// (run_agent_daemon) in a thread; a synthetic evaluator through the real worker link.
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "agent/agent_daemon.h"
#include "coordinator/engine.h"
#include "tests/coordinator/describe.h"
#include "tests/coordinator/engine_fixture.h"
#include "tests/support/synthetic_worker.h"

namespace kiln::coordinator {
namespace {

using Clock = std::chrono::steady_clock;

// reduce with a cpu template of 12 configurations, so that the agent's draws and the engine's own
// template children do not simply meet on the same few.
class EngineAgentTest : public EngineFixture {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(start_store());
    std::filesystem::copy(std::string(KILN_SOURCE_DIR) + "/targets/reduce", targets_dir() + "/reduce",
                          std::filesystem::copy_options::recursive);
    std::ifstream in(targets_dir() + "/reduce/target.json");
    nlohmann::json spec = nlohmann::json::parse(in);
    spec["backends"]["cpu"]["template"]["params"]["UNROLL"] = {1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 14, 16};
    std::ofstream(targets_dir() + "/reduce/target.json") << spec.dump(2);
    ASSERT_NE(add_target(targets_dir() + "/reduce"), nullptr);
  }
  std::string targets_dir() const { return dir_.path(); }
  testing::TempDir dir_;
};

TEST_F(EngineAgentTest, AnAgentIsAskedAboutTheSeedWhenNoTemplateChildBeatsIt) {
  auto d = test_dispatcher(ctx_, *store_);
  ASSERT_NE(d, nullptr);
  std::atomic<bool> agent_stop{false};
  agent::AgentOptions a;
  a.connect = d->endpoint();
  a.targets_dir = targets_dir();
  a.worker_id = "agent-under-test";
  a.heartbeat.interval_ms = 50;
  Status agent_status;
  std::thread agent_thread([&] { agent_status = agent::run_agent_daemon(a, agent_stop); });
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
  // The seed is the fastest kernel there is: no child is ever kept, every parent is the seed. Each
  // evaluation takes 20 ms, so that the agent's answers arrive while the search still runs.
  wo.time_fn = [](const proto::EvaluateTask& t) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    return t.kind == proto::kKindSeed ? 100.0 : 300.0;
  };
  testing::SyntheticWorker w(ctx_, d->endpoint(), wo);
  Status ran = run_engine(engine, stop, 30);
  agent_stop.store(true);
  agent_thread.join();
  ASSERT_TRUE(ran.is_ok()) << ran.to_string();
  ASSERT_TRUE(engine.finished());

  const AgentStats& s = engine.agent_stats();
  EXPECT_GT(s.asked, 0u);
  EXPECT_EQ(s.failed, 0u) << "the agent could not answer about the seed";
  EXPECT_GT(s.children, 0u) << "asked " << s.asked << ", answered " << s.answered << ", duplicates "
                            << s.duplicates;
  EXPECT_EQ(s.rejected, 0u);
  // Its children were evaluated as children of the seed, named as the agent's.
  size_t from_agent = 0;
  for (const proto::EvaluateTask& t : w.tasks()) from_agent += t.kind == proto::kKindTemplate ? 1 : 0;
  EXPECT_GE(from_agent, s.children);
  const std::vector<TargetReport> reports = engine.reports();
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_EQ(reports[0].best_label, "seed") << describe(reports[0]);
}

}  // namespace
}  // namespace kiln::coordinator
