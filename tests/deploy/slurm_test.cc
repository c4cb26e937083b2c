// deploy/slurm/kiln.sbatch on a real Slurm: Debian's munged, slurmctld and two slurmd started in
// the foreground on this machine (deploy/slurm/local-cluster.sh: two nodes in network namespaces
// of their own joined by a bridge, no cgroups, two fake GPUs per node as character devices), the
// job submitted with sbatch over both nodes on the cpu backend with three evaluator steps and an
// agent step, so that one evaluator reaches the coordinator from the other node over TCP. The job
// loses an evaluator step to `scancel`, then is requeued mid-run
// (`scontrol requeue`), continues its run from Redis on its restart and completes.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <thread>

#include "tests/support/fault_farm.h"
#include "tests/support/test_env.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

class SlurmJob : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root (slurmd and fake GPU devices)";
    std::string out;
    if (testing::run_command("command -v slurmctld slurmd munged sbatch 2>&1", &out) != 0)
      GTEST_FAIL() << "Slurm is not installed (scripts/bootstrap installs slurmctld, slurmd, "
                      "slurm-client and munge): "
                   << out;
    cluster_ = dir_.file("cluster");
    const std::string start = "bash " KILN_SOURCE_DIR "/deploy/slurm/local-cluster.sh start " +
                              cluster_ + " " + std::to_string(testing::free_tcp_port()) + " " +
                              std::to_string(testing::free_tcp_port()) + " 2 16 2 2>&1";
    ASSERT_EQ(testing::run_command(start, &out), 0) << out;
    started_ = true;
    // reduce with a small cpu benchmark and a PAD parameter the kernel ignores, so that the
    // search outlasts the faults.
    targets_ = dir_.file("targets");
    ASSERT_EQ(testing::copy_padded_target(targets_, "reduce", 400), "");
  }
  void TearDown() override {
    if (!started_) return;
    std::string out;
    slurm("scancel --full " + job_ + " 2>&1", &out);
    testing::run_command("bash " KILN_SOURCE_DIR "/deploy/slurm/local-cluster.sh stop " + cluster_,
                         &out);
  }
  int slurm(const std::string& command, std::string* out) {
    return testing::run_command("SLURM_CONF=" + cluster_ + "/slurm.conf " + command, out);
  }
  // Submits the job under `name` with a budget; returns its id.
  std::string submit(const std::string& name, int budget_s) {
    const std::string env = "KILN=" + testing::kiln_binary() +
                            " KILN_BACKEND=cpu KILN_TARGETS=reduce KILN_EVALUATORS=3 KILN_BUDGET=" +
                            std::to_string(budget_s) + "s KILN_OUT=" + dir_.file(name) +
                            " KILN_ARGS='--targets-dir " + targets_ + " --patience 100000'" +
                            " KILN_EVAL_ARGS='--targets-dir " + targets_ + " --cache-dir " +
                            dir_.file("cache") + "'";
    std::string out;
    EXPECT_EQ(slurm(env + " sbatch --parsable --job-name=" + name +
                        " -N 2 --ntasks-per-node=3 --gres=gpu:2 --chdir=" + dir_.path() +
                        " " KILN_SOURCE_DIR "/deploy/slurm/kiln.sbatch 2>&1",
                    &out),
              0)
        << out;
    job_ = out.substr(0, out.find_first_of(";\n"));
    submitted_ = Clock::now();
    return job_;
  }
  // Prints how far the test is, with the seconds since the job was submitted: a failure on a loaded
  // runner then says which phase took the time.
  void phase(const std::string& what) {
    const double s = std::chrono::duration<double>(Clock::now() - submitted_).count();
    std::printf("[slurm +%.1fs] %s\n", s, what.c_str());
    std::fflush(stdout);
  }
  // Whether the job's coordinator has said it exited (its run is over).
  bool run_over(const std::string& name) {
    return testing::read_file(dir_.file(name + ".out")).find("coordinator exited with") !=
           std::string::npos;
  }
  // Waits until `done` holds, up to `seconds`.
  template <class F>
  bool wait_for(F done, int seconds) {
    const auto end = Clock::now() + std::chrono::seconds(seconds);
    while (Clock::now() < end) {
      if (done()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
    return false;
  }
  // Whether the job has left the queue: squeue answered and listed nothing, or no longer knows the
  // id. A squeue that fails (slurmctld busy right after a requeue) says nothing: once, its empty
  // output passed for a finished job half a second after the requeue.
  bool job_gone() {
    std::string out;
    if (slurm("squeue -h -j " + job_ + " -o %T 2>&1", &out) == 0)
      return out.find_first_not_of(" \n") == std::string::npos;
    return out.find("Invalid job id") != std::string::npos;
  }
  // The number of tasks the evaluators finished so far (their logs' "task ...: <outcome>" lines).
  size_t tasks_done(const std::string& name) {
    size_t n = 0;
    for (int i = 0; i < 3; ++i) {
      std::istringstream log(
          testing::read_file(dir_.file(name + "/logs/evaluator-" + std::to_string(i) + ".log")));
      std::string line;
      while (std::getline(log, line))
        n += line.find(" ms") != std::string::npos && line.find("task ") != std::string::npos;
    }
    return n;
  }
  // Every task of results.jsonl answered once and no candidate evaluated again (a resumed run
  // evaluates nothing again that Redis holds); returns the results per evaluator.
  std::map<std::string, int> check_results(const std::string& name) {
    std::map<std::string, int> per_task, per_candidate, retimes, per_evaluator;
    std::map<std::string, std::string> lines;  // by candidate, for the failure message
    std::ifstream results(dir_.file(name + "/run/results.jsonl"));
    std::string line;
    while (std::getline(results, line)) {
      nlohmann::json r = nlohmann::json::parse(line, nullptr, false);
      EXPECT_FALSE(r.is_discarded()) << line;
      if (r.is_discarded()) continue;
      ++per_task[r["task_id"].get<std::string>()];
      ++per_candidate[r["candidate_id"].get<std::string>()];
      if (r.value("retime", false)) ++retimes[r["candidate_id"].get<std::string>()];
      lines[r["candidate_id"].get<std::string>()] +=
          r["task_id"].get<std::string>() + " " + r.value("evaluator", "") + "; ";
      ++per_evaluator[r["evaluator"].get<std::string>()];
    }
    EXPECT_FALSE(per_task.empty()) << name << ": no results";
    for (const auto& [task, n] : per_task) EXPECT_EQ(n, 1) << task;
    // A kept child is timed a second time (a re-time, so marked in its row), by design.
    for (const auto& [candidate, n] : per_candidate) {
      EXPECT_EQ(n, 1 + retimes[candidate]) << candidate << ": " << lines[candidate];
    }
    return per_evaluator;
  }
  std::string context(const std::string& name) {
    return testing::read_file(dir_.file(name + ".out")) + "\n--- coordinator\n" +
           testing::read_file(dir_.file(name + "/logs/coordinator.out"));
  }

  testing::TempDir dir_;
  std::string cluster_, targets_, job_ = "0";
  Clock::time_point submitted_ = Clock::now();
  bool started_ = false;
};

// kiln.sbatch's placement of its steps, run alone with the variables Slurm would set: evaluators
// go where a CPU of the job sits beside a free GPU, agents on what CPUs are left, and a step that
// has no place is reported instead of left pending (a job given 1 CPU on node1 and 5 on node2
// once left an evaluator step waiting for the whole run).
std::string place(const std::string& cpus_per_node, int evaluators) {
  const std::string script = testing::read_file(KILN_SOURCE_DIR "/deploy/slurm/kiln.sbatch");
  const size_t from = script.find("# [placement"), to = script.find("# [end of placement]");
  if (from == std::string::npos || to == std::string::npos) return "no placement block";
  testing::TempDir dir;
  const std::string run = dir.write(
      "place.sh", "set -uo pipefail\nnodes=(node1 node2)\nSLURM_JOB_CPUS_PER_NODE='" +
                      cpus_per_node + "'\nSLURM_GPUS_ON_NODE=2\n" + script.substr(from, to - from) +
                      "\nfor ((i = 0; i < " + std::to_string(evaluators) +
                      "; i++)); do place_step 1; echo -n \"e:${node:-none} \"; done\n"
                      "place_step 0; echo \"a:${node:-none}\"\n");
  std::string out;
  testing::run_command("bash " + run + " 2>&1", &out);
  return out;
}

TEST(SlurmPlacement, EvaluatorsGoWhereACpuSitsBesideAGpuAndWhatCannotRunIsSaid) {
  EXPECT_EQ(place("3(x2)", 3), "e:node1 e:node1 e:node2 a:node2\n");
  EXPECT_EQ(place("2,4", 3), "e:node1 e:node2 e:node2 a:node2\n");
  EXPECT_EQ(place("5,1", 3), "e:node1 e:node1 e:node2 a:node1\n");
  // The coordinator takes node1's only CPU, and node2 has two GPUs: one evaluator has no place.
  EXPECT_EQ(place("1,5", 3), "e:node2 e:node2 e:none a:node2\n");
  EXPECT_EQ(place("1,1", 2), "e:node2 e:none a:none\n");
  // Without the job's CPU counts every step is left to Slurm.
  EXPECT_EQ(place("", 2), "e:- e:- a:-\n");
}

// One job through both faults, one after the other (a cluster and a job start cost half a minute).
TEST_F(SlurmJob, SurvivesAStepCancelledAndARequeueAndFinishesItsRunWithOneGpuPerEvaluator) {
  const std::string name = "kiln-slurm";
  // The faults come one after the other as the job reaches each point, not at fixed times; the
  // budget only has to outlast them. On a loaded runner (a clean-clone CI beside image builds)
  // the first tasks came late enough that a 60 s, then a 90 s run ended before the requeue: the
  // budget is 150 s, and each phase is printed with its time so that a failure says where it was.
  submit(name, 150);
  ASSERT_TRUE(wait_for([&] { return tasks_done(name) >= 3; }, 120)) << context(name);
  phase("3 tasks done");
  // Cancel evaluator 1's step, as an operator (or a node failure) would. Tasks done by the others
  // say nothing of whether its step has started yet: wait until squeue lists it.
  std::string steps, step;
  wait_for(
      [&] {
        slurm("squeue -h -s -j " + job_ + " -o '%i %j'", &steps);
        std::istringstream lines(steps);
        for (std::string line; std::getline(lines, line);) {
          if (line.find("evaluator-1") != std::string::npos) step = line.substr(0, line.find(' '));
        }
        return !step.empty();
      },
      60);
  ASSERT_FALSE(step.empty()) << steps << "\n--- evaluator-1.out\n"
                             << testing::read_file(dir_.file(name + "/logs/evaluator-1.out"))
                             << "\n--- job\n"
                             << context(name);
  std::string out;
  ASSERT_EQ(slurm("scancel " + step + " 2>&1", &out), 0) << out;
  phase("step " + step + " (evaluator-1) cancelled");
  // The run goes on without it: the other evaluators keep answering.
  const size_t before = tasks_done(name);
  ASSERT_TRUE(wait_for([&] { return tasks_done(name) > before; }, 90)) << context(name);
  phase("a task done after the cancel");

  // Requeue the whole job mid-run, as a preemption does. A run that already ended would only be
  // rewritten on the restart, which is not what this test is about: say so instead.
  ASSERT_FALSE(run_over(name)) << "the run ended before the requeue; the budget is too short for "
                                  "this runner\n"
                               << context(name);
  ASSERT_EQ(slurm("scontrol requeue " + job_ + " 2>&1", &out), 0) << out;
  ASSERT_TRUE(wait_for(
      [&] {
        std::string state;
        slurm("squeue -h -j " + job_ + " -o %T", &state);
        return state.find("PENDING") != std::string::npos;
      },
      60))
      << context(name);
  phase("requeued");
  // A requeued job waits two minutes before it may start again; the test does not.
  ASSERT_EQ(slurm("scontrol update JobId=" + job_ + " StartTime=now 2>&1", &out), 0) << out;
  ASSERT_TRUE(wait_for([&] { return job_gone(); }, 300)) << context(name);
  phase("job done");

  const std::string batch = context(name);
  EXPECT_NE(batch.find("restart 1"), std::string::npos) << batch;
  EXPECT_NE(batch.find("continuing it (--resume-if-any)"), std::string::npos) << batch;
  EXPECT_NE(batch.find("of search already spent"), std::string::npos) << batch;
  EXPECT_NE(batch.find("coordinator exited with 0"), std::string::npos) << batch;
  EXPECT_EQ(batch.find("not started"), std::string::npos) << batch;  // every step had its place
  nlohmann::json summary = nlohmann::json::parse(
      testing::read_file(dir_.file(name + "/run/summary.json")), nullptr, false);
  ASSERT_TRUE(summary.is_array() && summary.size() == 1) << batch;
  EXPECT_GT(summary[0]["evaluations"].get<int>(), 6) << summary.dump();
  // Each evaluator step of the first start had its own GPU, on one node or the other: two fit on
  // node1 beside the coordinator, so at least one worked from node2.
  std::set<std::string> devices, nodes;
  for (int i = 0; i < 3; ++i) {
    const std::string first =
        testing::read_file(dir_.file(name + "/logs/evaluator-" + std::to_string(i) + ".out"));
    const size_t on = first.find(" on "), at = first.find("CUDA_VISIBLE_DEVICES=");
    ASSERT_TRUE(on != std::string::npos && at != std::string::npos) << first;
    const std::string node = first.substr(on + 4, first.find(',', on) - on - 4);
    nodes.insert(node);
    devices.insert(node + " " + first.substr(at, first.find('\n', at) - at));
  }
  EXPECT_EQ(devices.size(), 3u);
  EXPECT_EQ(nodes, (std::set<std::string>{"node1", "node2"}));
  const std::map<std::string, int> by = check_results(name);
  // Evaluators 0 and 2 were never cancelled: both answered tasks.
  for (int i : {0, 2}) {
    const std::string id = "slurm-" + job_ + "-e" + std::to_string(i);
    EXPECT_GT(by.count(id) ? by.at(id) : 0, 0) << id << " answered nothing";
  }
  std::printf(
      "slurm: job %s on 2 nodes, step %s cancelled, requeued, %d evaluations by %zu evaluators\n",
      job_.c_str(), step.c_str(), summary[0]["evaluations"].get<int>(), by.size());
}

}  // namespace
}  // namespace kiln
