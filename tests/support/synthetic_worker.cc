// See synthetic_worker.h.
#include "tests/support/synthetic_worker.h"

#include <gtest/gtest.h>

#include <functional>

#include "shared/worker_link.h"

namespace kiln::testing {

proto::EvaluationResult verified_result(const proto::EvaluateTask& task, const std::string& arch,
                                        double median_us) {
  proto::EvaluationResult r;
  r.task_id = task.task_id;
  r.candidate_id = task.candidate_id;
  r.arch = arch;
  r.outcome = proto::Outcome::kVerified;
  for (std::string_view stage : proto::kVerifiedStages)
    r.stages.push_back({std::string(stage), true, "", 0, 1});
  r.timing.median_us = median_us;
  r.timing.samples = 10;
  r.timing.noise_rel = 0.002;
  r.metrics["fraction_of_floor"] = 0.25;
  r.shape = task.shape;
  return r;
}

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
  // The same link and hello as `kiln evaluator`: only the evaluation itself is synthetic.
  auto link = net::WorkerLink::connect(ctx, endpoint, options_.worker_id, options_.heartbeat,
                                       "a synthetic evaluator");
  ASSERT_TRUE(link.is_ok()) << link.status().to_string();
  const std::string arch = options_.gpu_model.empty() ? "cpu/test" : "test/" + options_.gpu_model;
  const proto::Hello hello = net::evaluator_hello(options_.worker_id, options_.backend, kCapacity,
                                                  options_.gpu_model, arch, options_.spec_hashes);
  size_t held = 0;  // tasks received and not answered
  auto announce = [&] {
    link->send(hello);
    if (kCapacity > held) link->send(proto::Credit{static_cast<uint32_t>(kCapacity - held)});
  };
  announce();
  while (!quit_) {
    auto got = link->receive(10);
    if (!got.is_ok()) return;
    if (got->has_value()) {
      proto::Envelope& env = **got;
      if (auto* task = std::get_if<proto::EvaluateTask>(&env.body)) {
        {
          std::lock_guard lock(mu_);
          received_.insert(task->task_id);
          tasks_.push_back(*task);
        }
        const bool holding = options_.hold_after_limit && answered_ >= options_.limit;
        if (holding) {
          ++held;
        } else {
          proto::EvaluationResult r = verified_result(
              *task, arch,
              (options_.time_fn ? options_.time_fn(*task) : time_of(task->candidate_id)) *
                  options_.time_scale);
          if (!options_.echo_shape) r.shape.clear();
          link->send(r);
          link->send(proto::Credit{1});
          if (++answered_ >= options_.limit && options_.stop_after) options_.stop_after->store(true);
        }
      } else if (auto* bye = std::get_if<proto::Bye>(&env.body)) {
        if (link->after_bye(*bye)) return;
      } else {
        link->refuse(env);
      }
    }
    link->keep_alive(quit_, announce);
  }
}

}  // namespace kiln::testing
