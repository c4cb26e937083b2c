// A synthetic evaluator for coordinator tests: a thread that speaks to the coordinator through the
// real worker link and hello (shared/worker_link.h: liveness, re-announcing, bye handling), as an
// evaluator of the backend and GPU model given, and answers every task at once with a verified
// result (every stage a verified result needs) whose time is a function of the candidate id (so a
// re-time measures the same), scaled by `time_scale` (two "GPU models" that are not equally fast).
// Sets `stop_after` once it has answered `limit` tasks; with `hold_after_limit` it then keeps every
// later task unanswered (it still heartbeats), so a test can be sure this worker finishes nothing
// more.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>
#include <zmq.hpp>

#include "shared/heartbeat.h"
#include "shared/protocol.h"

namespace kiln::testing {

struct SyntheticWorkerOptions {
  std::string backend = "cpu";
  std::string gpu_model;          // "" for a cpu worker
  std::string worker_id = "synthetic";
  double time_scale = 1.0;
  size_t limit = 1000000;         // answers before `stop_after` is set
  std::atomic<bool>* stop_after = nullptr;
  bool hold_after_limit = false;  // past `limit`, receive tasks but answer none
  std::map<std::string, std::string> spec_hashes;  // announced in the hello
  // The time (us, before time_scale) of a task; default time_of(candidate id). Lets a test give a
  // template's space a landscape (a function of the parameters and the sweep's shape).
  std::function<double(const proto::EvaluateTask&)> time_fn;
  bool echo_shape = true;  // false: answers like a kiln from before shape sweeps
  net::HeartbeatPolicy heartbeat{100, 3, 100, 1000};
};

// A verified result for `task` as an evaluator sends it: every stage of proto::kVerifiedStages
// passed, a timing with that median, and the task's shape echoed (as the evaluator does).
proto::EvaluationResult verified_result(const proto::EvaluateTask& task, const std::string& arch,
                                        double median_us);

class SyntheticWorker {
 public:
  SyntheticWorker(zmq::context_t& ctx, std::string endpoint, SyntheticWorkerOptions options);
  // The form most tests use: a cpu worker that sets `stop_after` after `limit` answers.
  SyntheticWorker(zmq::context_t& ctx, std::string endpoint, size_t limit, std::atomic<bool>* stop_after);
  ~SyntheticWorker();

  size_t answered() const { return answered_.load(); }
  std::set<std::string> received();              // task ids
  std::vector<proto::EvaluateTask> tasks();      // every task received, in order

  // The time (us) a worker of time_scale 1 reports for a candidate.
  static double time_of(const std::string& candidate_id);

 private:
  void loop(zmq::context_t& ctx, const std::string& endpoint);
  static constexpr size_t kCapacity = 4;

  SyntheticWorkerOptions options_;
  std::mutex mu_;
  std::set<std::string> received_;
  std::vector<proto::EvaluateTask> tasks_;
  std::atomic<bool> quit_{false};
  std::atomic<size_t> answered_{0};
  std::thread thread_;
};

}  // namespace kiln::testing
