// Fault tests of `kiln run --resume` on the cpu backend, with real processes: a `kiln run` is
// started, the test watches its search log in the run's Redis until results are in and tasks are
// in flight, then kills something for real -- the coordinator process (SIGKILL), or its private
// redis-server (SIGKILL) -- and `kiln run --resume` on the same folder finishes the run. Checked:
// no process is left behind, no result is lost (every candidate logged before the fault has a
// result at the end), none is repeated (each task answered once, each candidate at most twice:
// a crowned best's re-time; a task answered before the fault is not evaluated again, which the
// evaluators' logs show), and the summary and best kernels are written and agree.
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "shared/redis_client.h"
#include "shared/redis_store.h"
#include "tests/support/test_env.h"

extern char** environ;

namespace kiln {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

using testing::read_json;

std::string read_file(const std::string& path, size_t from = 0) {
  std::ifstream in(path, std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return from < text.size() ? text.substr(from) : std::string();
}

std::vector<pid_t> read_pids(const std::string& path) {
  std::vector<pid_t> pids;
  std::ifstream in(path);
  for (pid_t p; in >> p;) pids.push_back(p);
  return pids;
}

// A live process: not a zombie, not a pid no one holds.
bool alive(pid_t pid) {
  if (pid <= 0 || kill(pid, 0) != 0) return false;
  const std::string stat = read_file("/proc/" + std::to_string(pid) + "/stat");
  const size_t paren = stat.rfind(')');
  return paren == std::string::npos || paren + 2 >= stat.size() ||
         (stat[paren + 2] != 'Z' && stat[paren + 2] != 'X');
}

bool poll_until(const std::function<bool()>& done, std::chrono::seconds limit) {
  const auto deadline = Clock::now() + limit;
  while (Clock::now() < deadline) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return done();
}

// `sh -c "exec COMMAND"` in the background; its pid.
pid_t start(const std::string& command) {
  std::string line = "exec " + command;
  std::vector<char*> argv = {const_cast<char*>("/bin/sh"), const_cast<char*>("-c"), line.data(), nullptr};
  pid_t pid = -1;
  if (posix_spawn(&pid, "/bin/sh", nullptr, nullptr, argv.data(), environ) != 0) return -1;
  return pid;
}

// Waits for our child `pid` to exit; its exit status, or -1 after `limit` (it is killed then).
int wait_exit(pid_t pid, std::chrono::seconds limit) {
  const auto deadline = Clock::now() + limit;
  int status = 0;
  while (Clock::now() < deadline) {
    if (waitpid(pid, &status, WNOHANG) == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  kill(pid, SIGKILL);
  waitpid(pid, &status, 0);
  return -1;
}

// What the run's search log in Redis says so far.
struct LogView {
  std::map<std::string, std::string> submitted;  // task -> candidate
  std::set<std::string> answered;                // tasks with a logged result
  long long inflight = 0;                        // leases (tasks handed to an evaluator)
};

std::optional<LogView> read_log(const std::string& socket) {
  redis::RedisOptions o;
  o.url = "unix://" + socket;
  o.connect_timeout_ms = 500;
  o.max_reconnect_attempts = 1;
  auto client = redis::RedisClient::connect(o);
  if (!client.is_ok()) return std::nullopt;
  redis::Store store(*client);
  auto run = store.get_run();
  if (!run.is_ok() || !run->count("id")) return std::nullopt;
  LogView v;
  std::string after;
  while (true) {
    auto page = store.read_events(run->at("id"), after, 1000);
    if (!page.is_ok()) return std::nullopt;
    if (page->empty()) break;
    for (const auto& ev : *page) {
      std::map<std::string, std::string> f(ev.fields.begin(), ev.fields.end());
      if (f["type"] == "submit") v.submitted[f["task"]] = f["cand"];
      if (f["type"] == "result") v.answered.insert(f["task"]);
      after = ev.id;
    }
  }
  auto n = client->command({"ZCARD", "kiln:inflight"});
  if (n.is_ok()) v.inflight = n->integer;
  return v;
}

// The tasks each evaluator log says were evaluated ("evaluating task T (C on target)"), from byte
// `from` of each log on.
std::map<std::string, std::string> evaluated(const std::string& out, const std::map<std::string, size_t>& from) {
  std::map<std::string, std::string> tasks;  // task -> candidate
  for (const auto& entry : fs::directory_iterator(out)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("evaluator-", 0) != 0) continue;
    auto it = from.find(name);
    std::istringstream lines(read_file(entry.path().string(), it == from.end() ? 0 : it->second));
    for (std::string line; std::getline(lines, line);) {
      const size_t at = line.find("evaluating task ");
      if (at == std::string::npos) continue;
      std::istringstream words(line.substr(at + 16));
      std::string task, cand;
      words >> task >> cand;
      tasks[task] = cand.empty() ? cand : cand.substr(1);  // "(id"
    }
  }
  return tasks;
}

std::map<std::string, size_t> log_sizes(const std::string& out) {
  std::map<std::string, size_t> sizes;
  for (const auto& entry : fs::directory_iterator(out)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("evaluator-", 0) == 0) sizes[name] = fs::file_size(entry.path());
  }
  return sizes;
}

struct Results {
  std::map<std::string, int> per_task, per_candidate;
  size_t lines = 0;
};

Results read_results(const std::string& path) {
  Results r;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded()) continue;
    ++r.lines;
    ++r.per_task[j["task_id"].get<std::string>()];
    ++r.per_candidate[j["candidate_id"].get<std::string>()];
  }
  return r;
}

class KilnResume : public ::testing::Test {
 protected:
  std::string run_command_line(const std::string& extra) const {
    // --redis-retry 3s: a Redis killed for good (ContinuesFromTheAofAfterRedisWasKilled) is waited
    // for 3 s, not the default 5 minutes, before the run stops and says how to continue.
    return testing::kiln_binary() +
           " run --targets reduce,rmsnorm --backend cpu --evaluators 2 --budget 240s" +
           " --redis-retry 3s --patience 5 --out " + out_ + " --cache-dir " + dir_.path() +
           "/cache --targets-dir " KILN_SOURCE_DIR "/targets" + extra;
  }
  // Starts `kiln run` and waits until its log has at least `results` results and a task is in
  // flight. Returns the view of the log at that moment.
  LogView start_and_wait(size_t results, const std::string& flags = "") {
    pid_ = start(run_command_line(flags + " > " + dir_.path() + "/first.log 2>&1"));
    EXPECT_GT(pid_, 0);
    LogView seen;
    const bool ready = poll_until(
        [&] {
          if (!alive(pid_)) return true;
          std::optional<LogView> v = read_log(out_ + "/redis/redis.sock");
          if (v) seen = *v;
          return v && v->answered.size() >= results && v->inflight > 0;
        },
        std::chrono::seconds(120));
    EXPECT_TRUE(ready && alive(pid_)) << "the run ended or stalled before the fault:\n" << read_file(dir_.path() + "/first.log");
    return seen;
  }
  void expect_no_evaluators_left() {
    const std::vector<pid_t> pids = read_pids(out_ + "/evaluators.pid");
    EXPECT_FALSE(pids.empty());
    EXPECT_TRUE(poll_until([&] {
      for (pid_t p : pids) if (alive(p)) return false;
      return true;
    }, std::chrono::seconds(30))) << "an evaluator outlived its coordinator";
  }
  // The resumed run finishes, leaves nothing running, and its output folder is consistent.
  // `before`: tasks answered before the fault; `sizes`: the evaluator logs' sizes at the fault.
  // `how`: --resume, or --resume-if-any (the way a scheduler starts a coordinator again).
  void resume_and_check(const LogView& before, const std::map<std::string, size_t>& sizes,
                        const std::string& how = "--resume") {
    const pid_t old_redis = read_pids(out_ + "/redis/redis.pid").at(0);
    std::string output;
    const auto t0 = Clock::now();
    const int rc = testing::run_command(testing::kiln_binary() + " run " + how + " --out " + out_ +
                                            " --cache-dir " + dir_.path() +
                                            "/cache --targets-dir " KILN_SOURCE_DIR "/targets",
                                        &output);
    ASSERT_EQ(rc, 0) << output;
    EXPECT_NE(output.find("resuming run"), std::string::npos) << output;
    std::fprintf(stderr, "[ resume took %.1f s ]\n", std::chrono::duration<double>(Clock::now() - t0).count());
    // Nothing left running: the earlier redis-server was stopped and restarted, the resumed run's
    // own processes stopped with it.
    EXPECT_FALSE(alive(old_redis)) << "the earlier redis-server is still running";
    for (pid_t p : read_pids(out_ + "/evaluators.pid")) EXPECT_FALSE(alive(p)) << p;
    for (pid_t p : read_pids(out_ + "/redis/redis.pid")) EXPECT_FALSE(alive(p)) << p;

    const Results all = read_results(out_ + "/results.jsonl");
    for (const auto& [task, n] : all.per_task) EXPECT_EQ(n, 1) << task;
    for (const auto& [cand, n] : all.per_candidate) EXPECT_LE(n, 2) << cand;  // a crowned best's re-time
    // None lost: every candidate logged before the fault has a result; every task answered
    // before the fault is in the results under its own id ...
    for (const auto& [task, cand] : before.submitted) EXPECT_TRUE(all.per_candidate.count(cand)) << cand;
    for (const auto& task : before.answered) EXPECT_TRUE(all.per_task.count(task)) << task;
    // ... and was not evaluated again after the fault.
    const std::map<std::string, std::string> again = evaluated(out_, sizes);
    EXPECT_FALSE(again.empty()) << "the resumed run evaluated nothing";
    for (const auto& [task, cand] : again) {
      EXPECT_FALSE(before.answered.count(task)) << "task " << task << " was answered before the fault and evaluated again";
    }

    // The output folder agrees with itself.
    nlohmann::json summary = read_json(out_ + "/summary.json");
    ASSERT_TRUE(summary.is_array() && summary.size() == 2) << output;
    size_t evaluations = 0;
    for (const auto& t : summary) {
      evaluations += t["evaluations"].get<size_t>();
      EXPECT_NE(t["state"].get<std::string>().find("converged"), std::string::npos) << t.dump();
      EXPECT_GT(t["seed_us"].get<double>(), 0) << t.dump();
      EXPECT_LE(t["best_us"].get<double>(), t["seed_us"].get<double>()) << t.dump();
      nlohmann::json best = read_json(out_ + "/best/" + t["target"].get<std::string>() + ".json");
      ASSERT_TRUE(best.is_object()) << t.dump();
      EXPECT_EQ(best["best_id"], t["best_id"]);
      EXPECT_EQ(best["verification"]["outcome"], "verified") << best.dump();
      EXPECT_TRUE(all.per_candidate.count(t["best_id"].get<std::string>())) << t.dump();
    }
    EXPECT_EQ(evaluations, all.lines);

    // A second resume finds the run finished and only rewrites the folder; so does a scheduler's
    // --resume-if-any.
    ASSERT_EQ(testing::run_command(testing::kiln_binary() + " run --resume-if-any --out " + out_ +
                                       " --targets-dir " KILN_SOURCE_DIR "/targets",
                                   &output),
              0)
        << output;
    EXPECT_NE(output.find("had already finished"), std::string::npos) << output;
    EXPECT_EQ(read_results(out_ + "/results.jsonl").per_task, all.per_task);
  }

  testing::TempDir dir_;
  std::string out_ = dir_.path() + "/run";
  pid_t pid_ = -1;
};

// The coordinator (`kiln run`) is killed with SIGKILL in the middle of the search: its evaluators
// follow it, its redis-server keeps the state, and `kiln run --resume` finishes the run.
TEST_F(KilnResume, FinishesARunWhoseCoordinatorWasKilled) {
  // Started and continued the way a scheduler does it: --resume-if-any starts a run where none is
  // recorded and continues the one that is.
  const LogView before = start_and_wait(4, " --resume-if-any");
  ASSERT_FALSE(HasFailure());
  // While it runs, no other kiln process may work in its folder.
  std::string output;
  EXPECT_EQ(testing::run_command(testing::kiln_binary() + " run --resume --out " + out_, &output), 2) << output;
  EXPECT_NE(output.find("another kiln process is working in"), std::string::npos) << output;
  ASSERT_EQ(kill(pid_, SIGKILL), 0);
  EXPECT_EQ(wait_exit(pid_, std::chrono::seconds(10)), 128 + SIGKILL);
  expect_no_evaluators_left();
  // What the dead run logged (read again now that nothing writes any more).
  std::optional<LogView> at_kill = read_log(out_ + "/redis/redis.sock");
  ASSERT_TRUE(at_kill.has_value()) << "the private redis-server did not outlive its coordinator";
  EXPECT_GE(at_kill->answered.size(), before.answered.size());
  EXPECT_GT(at_kill->submitted.size(), at_kill->answered.size()) << "nothing was in flight at the kill";
  resume_and_check(*at_kill, log_sizes(out_), "--resume-if-any");
}

// The private redis-server is killed with SIGKILL in the middle of the search: `kiln run` stops
// with a message saying how to continue, and `kiln run --resume` restarts Redis from its AOF and
// finishes the run without losing or repeating a result.
TEST_F(KilnResume, ContinuesFromTheAofAfterRedisWasKilled) {
  const LogView before = start_and_wait(4);
  ASSERT_FALSE(HasFailure());
  const pid_t redis = read_pids(out_ + "/redis/redis.pid").at(0);
  ASSERT_TRUE(alive(redis));
  ASSERT_EQ(kill(redis, SIGKILL), 0);
  const int rc = wait_exit(pid_, std::chrono::seconds(90));
  const std::string first = read_file(dir_.path() + "/first.log");
  EXPECT_EQ(rc, 1) << first;
  EXPECT_NE(first.find("kiln run --resume --out " + out_), std::string::npos) << first;
  expect_no_evaluators_left();
  // A new run may not take the folder over: the run in it is to be resumed.
  std::string output;
  EXPECT_EQ(testing::run_command(run_command_line(""), &output), 2) << output;
  EXPECT_NE(output.find("already holds run"), std::string::npos) << output;
  EXPECT_NE(output.find("kiln run --resume --out " + out_), std::string::npos) << output;
  // What the first run merged (its results.jsonl, written as it stopped) must survive unchanged.
  const Results merged = read_results(out_ + "/results.jsonl");
  EXPECT_GE(merged.lines, before.answered.size());
  LogView known = before;
  for (const auto& [task, n] : merged.per_task) known.answered.insert(task);
  resume_and_check(known, log_sizes(out_));
}

}  // namespace
}  // namespace kiln
