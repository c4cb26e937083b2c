// A synthetic evaluator for coordinator tests: a thread with its own DEALER that says hello as an
// evaluator (backend and GPU model as given), and answers every task at once with a verified
// result whose time is a function of the candidate id (so a re-time measures the same), scaled by
// `time_scale` (two "GPU models" that are not equally fast). Sets `stop_after` once it has
// answered `limit` tasks; with `hold_after_limit` it then keeps every later task unanswered (it
// still heartbeats), so a test can be sure this worker finishes nothing more.
#pragma once

#include <atomic>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <zmq.hpp>

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
};

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

  SyntheticWorkerOptions options_;
  std::mutex mu_;
  std::set<std::string> received_;
  std::vector<proto::EvaluateTask> tasks_;
  std::atomic<bool> quit_{false};
  std::atomic<size_t> answered_{0};
  std::thread thread_;
};

}  // namespace kiln::testing
