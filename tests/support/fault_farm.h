// A farm of real processes for fault tests: a persistent redis-server (AOF) the test owns, a
// `kiln coordinator` on a fixed loopback port (so that a `--resume` binds the same endpoint and the
// evaluators find it again), `kiln evaluator` processes, and targets copied to a temporary folder
// with small cpu benchmark shapes and a large parameter space (the search must not run out of
// candidates while the faults go on). Every process is a ChildProcess of the test: the test is
// the operator's supervisor, kills with SIGKILL and starts again.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "shared/child_process.h"
#include "shared/local_redis.h"
#include "shared/protocol.h"
#include "shared/redis_client.h"
#include "tests/support/test_env.h"

namespace kiln::testing {

struct FarmOptions {
  std::vector<std::string> targets = {"rmsnorm", "reduce"};
  int evaluators = 3;
  int budget_s = 300;         // search time (a coordinator's down time does not count)
  int redis_retry_s = 120;    // --redis-retry
  uint32_t in_flight = 4;     // --in-flight per target
  uint32_t pad_values = 200;  // size of the extra PAD parameter of every cpu template
};

class FaultFarm {
 public:
  explicit FaultFarm(FarmOptions options);
  ~FaultFarm();
  FaultFarm(const FaultFarm&) = delete;
  FaultFarm& operator=(const FaultFarm&) = delete;

  // Copies the targets, starts Redis, the coordinator (a new run) and the evaluators. "" when
  // everything runs, else why not.
  std::string start();

  const std::string& out() const { return out_; }
  const std::string& endpoint() const { return endpoint_; }
  const std::string& targets_dir() const { return targets_; }
  std::string coordinator_log() const { return dir_.file("coordinator.log"); }
  std::string evaluator_log(int i) const {
    return dir_.file("evaluator-" + std::to_string(i) + ".log");
  }
  std::string worker_id(int i) const { return "fault-ev" + std::to_string(i); }
  int evaluators() const { return options_.evaluators; }
  TempDir& dir() { return dir_; }

  // SIGKILL to the coordinator, then `kiln coordinator --resume` with the same --out, --redis,
  // --targets-dir and --bind; waits until it has written its endpoint again. "" or why not.
  std::string kill_and_resume_coordinator();
  // SIGKILL to Redis; `down` later, a redis-server on the same folder (it loads the AOF).
  std::string kill_and_restart_redis(std::chrono::milliseconds down);
  // SIGKILL to evaluator i, then the same command again (same worker id and folders).
  std::string kill_and_restart_evaluator(int i);
  void signal_evaluator(int i, int sig) { evaluators_.at(i).signal(sig); }
  pid_t evaluator_pid(int i) { return evaluators_.at(i).pid(); }

  // Starts an evaluator with argv of its own (a mismatched --targets-dir, ...); its log in `log`.
  Result<ChildProcess> start_evaluator(const std::string& worker_id, const std::string& targets_dir,
                                       const std::string& log) const;

  // Whether the coordinator still runs; once it ended, its exit status.
  bool coordinator_running() { return coordinator_ && coordinator_->running(); }
  std::optional<ExitStatus> coordinator_exit() const {
    return coordinator_ ? coordinator_->exit_status() : std::nullopt;
  }
  // Waits up to `limit` for every evaluator to end; their exit statuses (nullopt: still running).
  std::vector<std::optional<ExitStatus>> wait_evaluators(std::chrono::seconds limit);

  // A fresh client on the farm's Redis (short timeouts, one reconnect attempt), or why not.
  Result<redis::RedisClient> redis_client() const;
  std::string redis_url() const { return "unix://" + dir_.file("redis/redis.sock"); }
  // The spec hash of every target as the farm's coordinator loads it.
  std::map<std::string, std::string> spec_hashes() const;

 private:
  std::string start_coordinator(bool resume);
  std::string start_redis();
  std::string start_evaluator_slot(int i);

  FarmOptions options_;
  TempDir dir_;
  std::string out_, targets_, endpoint_;
  std::unique_ptr<LocalRedis> redis_;
  std::optional<ChildProcess> coordinator_;
  std::vector<ChildProcess> evaluators_;
};

// Everything a finished farm holds, read back for the checks.
struct FarmResults {
  // results.jsonl
  std::map<std::string, int> per_task;       // task id -> lines
  std::map<std::string, int> per_candidate;  // candidate id -> lines
  std::set<std::string> verified_candidates;
  size_t lines = 0;
  // kiln:result:{candidate}:{arch} keys in Redis, decoded
  std::map<std::string, proto::EvaluationResult> stored;  // key -> result
  // result events of the run's search log (kiln:events:{run})
  std::map<std::string, int> logged_results;  // task id -> events
  // forged: a 1 us time, or a candidate/task id of the rogue's ("forged-..."), anywhere
  std::vector<std::string> forged;
};

// Reads results.jsonl of `out` and the results and search log in Redis at `redis_url`.
Result<FarmResults> read_farm_results(const std::string& out, const std::string& redis_url);

// Text of a file from byte `from` on ("" when missing).
std::string read_text(const std::string& path, size_t from = 0);
// Lines of `text` that contain `needle`.
size_t count_lines_with(const std::string& text, const std::string& needle);

// Copies the built-in target `target` into `folder` with a small cpu benchmark (M=64, N=256: an
// evaluation takes a moment) and a PAD template parameter of `pad_values` values that the kernel
// ignores, so that a search outlasts what a test does to its farm. "" when done, else why not.
std::string copy_padded_target(const std::string& folder, const std::string& target,
                               uint32_t pad_values);

}  // namespace kiln::testing
