// The compile thread pool: a mutex-guarded queue of requests and their promises.
#include "evaluator/compile_pool.h"

#include <exception>
#include <string>
#include <utility>

namespace kiln::eval {
namespace {

CompileOutput failed_output(std::string log) {
  CompileOutput out;
  out.ok = false;
  out.log = std::move(log);
  return out;
}

}  // namespace

CompilePool::CompilePool(Compiler& compiler, size_t threads) : compiler_(compiler) {
  KILN_CHECK(threads > 0, "a compile pool needs at least one thread");
  workers_.reserve(threads);
  for (size_t i = 0; i < threads; ++i) workers_.emplace_back([this] { work(); });
}

CompilePool::~CompilePool() {
  std::deque<Task> abandoned;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    abandoned.swap(queue_);
  }
  wake_.notify_all();
  for (std::thread& t : workers_) t.join();
  for (Task& task : abandoned) {
    task.result.set_value(failed_output("kiln: compile pool shut down before this request ran"));
  }
}

std::future<CompileOutput> CompilePool::submit(CompileRequest request) {
  Task task{std::move(request), {}};
  std::future<CompileOutput> future = task.result.get_future();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    KILN_CHECK(!stopping_, "submit() on a compile pool that is shutting down");
    queue_.push_back(std::move(task));
  }
  wake_.notify_one();
  return future;
}

void CompilePool::work() {
  for (;;) {
    Task task;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (stopping_) return;  // the destructor answers what is still queued
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    CompileOutput out;
    try {
      out = compiler_.compile(task.request);
    } catch (const std::exception& e) {
      out = failed_output(std::string("kiln: compiler threw an exception: ") + e.what());
    } catch (...) {
      out = failed_output("kiln: compiler threw a non-standard exception");
    }
    task.result.set_value(std::move(out));
  }
}

}  // namespace kiln::eval
