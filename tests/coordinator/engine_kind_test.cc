// Which kernel a task names (proto::EvaluateTask::kind): the seed's for the seed and its re-times,
// the template's for every child. A seed may set defines that are template parameter names too
// (a Triton seed's BLOCK and num_warps); a kind read off the parameters then sent the seed's source
// with the template's entry point, and every Triton seed failed to load on the H200. Real
// Dispatcher, sockets and redis-server; synthetic evaluators through the real worker link; the
// engine stopped with the seed in flight and resumed from Redis, which rebuilds the task.
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "coordinator/engine.h"
#include "tests/coordinator/describe.h"
#include "tests/coordinator/engine_fixture.h"
#include "tests/support/synthetic_worker.h"

namespace kiln::coordinator {
namespace {

class EngineKindTest : public EngineFixture {
 protected:
  void SetUp() override { ASSERT_NO_FATAL_FAILURE(start_store()); }

  // reduce in a folder of its own, its cpu seed given UNROLL (a template parameter) as a define.
  std::string reduce_with_seed_define() {
    const std::string dir = dir_.path() + "/reduce";
    std::filesystem::copy(testing::builtin_targets_dir() + "/reduce", dir,
                          std::filesystem::copy_options::recursive);
    nlohmann::json spec = nlohmann::json::parse(std::ifstream(dir + "/target.json"));
    spec["backends"]["cpu"]["seed"]["defines"] = {{"UNROLL", "4"}};
    std::ofstream(dir + "/target.json") << spec.dump(2);
    return dir;
  }

  EngineOptions options() const {
    EngineOptions eo;
    eo.backend = "cpu";
    eo.seed = 5;
    eo.limits.max_proposals_without_gain = 6;
    eo.in_flight_per_target = 2;
    eo.toolchain = "kiln-test";
    return eo;
  }

  testing::TempDir dir_;
};

TEST_F(EngineKindTest, TheSeedRunsAsTheSeedEvenWhenItsDefinesAreTemplateParameters) {
  TargetSpec* spec = add_target(reduce_with_seed_define());
  ASSERT_NE(spec, nullptr);
  const BackendSpec& cpu = *spec->backend("cpu");
  ASSERT_TRUE(cpu.tunable && cpu.tunable->space.count("UNROLL"));

  // First engine: stopped as soon as its worker holds the seed's task, unanswered.
  std::vector<proto::EvaluateTask> tasks;
  std::atomic<bool> stop{false};
  auto d1 = test_dispatcher(ctx_, *store_);
  ASSERT_NE(d1, nullptr);
  Engine first(targets_, *d1, options(), &*store_);
  ASSERT_TRUE(first.begin().is_ok());
  {
    testing::SyntheticWorkerOptions hold;
    hold.limit = 0;
    hold.hold_after_limit = true;
    testing::SyntheticWorker worker(ctx_, d1->endpoint(), hold);
    std::thread watch([&] {
      const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      while (worker.tasks().empty() && std::chrono::steady_clock::now() < give_up)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      stop.store(true);
    });
    Status ran = run_engine(first, stop, 15);
    watch.join();
    ASSERT_TRUE(ran.is_ok()) << ran.to_string();
    tasks = worker.tasks();
  }
  ASSERT_EQ(tasks.size(), 1u) << "the seed's task, and nothing before its result";
  const std::string seed_id = tasks[0].candidate_id;
  EXPECT_EQ(tasks[0].kind, proto::kKindSeed);
  EXPECT_EQ(tasks[0].params, (std::map<std::string, std::string>{{"UNROLL", "4"}}));
  EXPECT_EQ(tasks[0].source, cpu.seed.source);

  // Second engine, resumed from Redis: the seed's task is rebuilt and sent again, then the
  // search runs to its end.
  stop.store(false);
  auto d2 = test_dispatcher(ctx_, *store_);
  ASSERT_NE(d2, nullptr);
  Engine second(targets_, *d2, options(), &*store_);
  Status resumed = second.resume();
  ASSERT_TRUE(resumed.is_ok()) << resumed.to_string();
  {
    testing::SyntheticWorker worker(ctx_, d2->endpoint(), 1000000, nullptr);
    Status ran = run_engine(second, stop, 30);
    ASSERT_TRUE(ran.is_ok()) << ran.to_string();
    std::vector<proto::EvaluateTask> more = worker.tasks();
    tasks.insert(tasks.end(), more.begin(), more.end());
  }
  ASSERT_TRUE(second.finished());
  size_t seed_tasks = 0, template_tasks = 0;
  for (size_t i = 0; i < tasks.size(); ++i) {
    const proto::EvaluateTask& t = tasks[i];
    SCOPED_TRACE("task " + std::to_string(i) + " " + t.task_id);
    if (t.candidate_id == seed_id) {
      ++seed_tasks;
      EXPECT_EQ(t.kind, proto::kKindSeed);
      EXPECT_EQ(t.source, cpu.seed.source);
    } else {
      ++template_tasks;
      EXPECT_EQ(t.kind, proto::kKindTemplate);
      EXPECT_EQ(t.params.size(), cpu.tunable->space.size());
    }
  }
  EXPECT_GE(seed_tasks, 2u) << "the seed's task before the stop and again after the resume";
  EXPECT_GT(template_tasks, 0u);
  ASSERT_EQ(second.reports().size(), 1u);
  EXPECT_GT(second.reports()[0].seed_us, 0) << describe(second.reports()[0]);
}

}  // namespace
}  // namespace kiln::coordinator
