// A fixed pool of threads that run Compiler::compile concurrently, so compiles for the next
// candidates overlap the timing of the current one (docs/design.md, "Evaluation pipeline").
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

#include "evaluator/backend.h"

namespace kiln::eval {

class CompilePool {
 public:
  // Starts `threads` (> 0) workers calling `compiler`, which must be thread-safe and outlive the
  // pool.
  CompilePool(Compiler& compiler, size_t threads);

  // Stops taking work, waits for the compiles in progress and answers every request still queued
  // with ok=false ("compile pool shut down"), so no future is left without a value.
  ~CompilePool();

  CompilePool(const CompilePool&) = delete;
  CompilePool& operator=(const CompilePool&) = delete;

  // Queues `request`; the future always receives a CompileOutput. An exception thrown by the
  // compiler is caught on the worker and reported as ok=false with the exception's text in the
  // log; nothing escapes a thread.
  std::future<CompileOutput> submit(CompileRequest request);

  size_t thread_count() const { return workers_.size(); }

 private:
  struct Task {
    CompileRequest request;
    std::promise<CompileOutput> result;
  };

  void work();

  Compiler& compiler_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Task> queue_;  // guarded by mutex_
  bool stopping_ = false;   // guarded by mutex_
  std::vector<std::thread> workers_;
};

}  // namespace kiln::eval
