// See synthetic_worker.h.
#include "tests/support/synthetic_worker.h"

#include <gtest/gtest.h>

#include <chrono>
#include <functional>

#include "shared/transport.h"

namespace kiln::testing {

SyntheticWorker::SyntheticWorker(zmq::context_t& ctx, std::string endpoint, SyntheticWorkerOptions options)
    : options_(std::move(options)), thread_([this, &ctx, endpoint] { loop(ctx, endpoint); }) {}

SyntheticWorker::SyntheticWorker(zmq::context_t& ctx, std::string endpoint, size_t limit,
                                 std::atomic<bool>* stop_after)
    : SyntheticWorker(ctx, std::move(endpoint), [&] {
        SyntheticWorkerOptions o;
        o.limit = limit;
        o.stop_after = stop_after;
        return o;
      }()) {}

SyntheticWorker::~SyntheticWorker() {
  quit_ = true;
  thread_.join();
}

std::set<std::string> SyntheticWorker::received() {
  std::lock_guard lock(mu_);
  return received_;
}

std::vector<proto::EvaluateTask> SyntheticWorker::tasks() {
  std::lock_guard lock(mu_);
  return tasks_;
}

double SyntheticWorker::time_of(const std::string& candidate_id) {
  return 20.0 + static_cast<double>(std::hash<std::string>{}(candidate_id) % 2000) / 100.0;
}

void SyntheticWorker::loop(zmq::context_t& ctx, const std::string& endpoint) {
  auto d = net::DealerSocket::connect(ctx, endpoint, net::SocketOptions{});
  ASSERT_TRUE(d.is_ok()) << d.status().to_string();
  proto::IdGenerator ids(options_.worker_id);
  auto send = [&](proto::Message body) {
    (void)d->send(proto::encode({proto::kProtocolVersion, ids.next(), std::move(body)}));
  };
  proto::Hello hello;
  hello.role = "evaluator";
  hello.node = "test";
  hello.worker_id = options_.worker_id;
  hello.gpu_model = options_.gpu_model;
  hello.arch = options_.gpu_model.empty() ? "cpu/test" : "test/" + options_.gpu_model;
  hello.backends = {options_.backend};
  hello.capacity = 4;
  send(hello);
  send(proto::Credit{4});
  auto last_beat = std::chrono::steady_clock::now();
  while (!quit_) {
    auto got = d->receive(10);
    if (got.is_ok() && got->has_value()) {
      auto env = proto::decode(**got);
      if (env.is_ok()) {
        auto* task = std::get_if<proto::EvaluateTask>(&env->body);
        const bool holding = options_.hold_after_limit && answered_ >= options_.limit;
        if (task) {
          std::lock_guard lock(mu_);
          received_.insert(task->task_id);
          tasks_.push_back(*task);
        }
        if (task && !holding) {
          proto::EvaluationResult r;
          r.task_id = task->task_id;
          r.candidate_id = task->candidate_id;
          r.arch = hello.arch;
          r.outcome = proto::Outcome::kVerified;
          r.timing.median_us = time_of(task->candidate_id) * options_.time_scale;
          r.timing.noise_rel = 0.002;
          r.metrics["fraction_of_floor"] = 0.25;
          send(r);
          send(proto::Credit{1});
          if (++answered_ >= options_.limit && options_.stop_after) options_.stop_after->store(true);
        }
      }
    }
    if (std::chrono::steady_clock::now() - last_beat > std::chrono::milliseconds(30)) {
      send(proto::Heartbeat{});
      last_beat = std::chrono::steady_clock::now();
    }
  }
}

}  // namespace kiln::testing
