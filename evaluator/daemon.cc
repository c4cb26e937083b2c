// Event loop of the evaluator daemon. The loop thread owns the socket; the worker thread owns the
// evaluators (one per target) and the toolchain. They meet in two small queues under one mutex.
// The loop thread also starts the compiles of each task as it arrives (Worker::prefetch), so
// they run while the worker evaluates the task before it.
#include "evaluator/daemon.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <thread>

#include "evaluator/ceilings.h"
#include "evaluator/compile_pool.h"
#include "evaluator/evaluation.h"
#include "evaluator/toolchain.h"
#include "shared/backends.h"
#include "shared/build_info.h"
#include "shared/protocol.h"
#include "shared/target_path.h"
#include "shared/target_spec.h"
#include "shared/text.h"
#include "shared/worker_link.h"

namespace kiln::eval {
namespace {

// Everything the worker thread needs to turn a task into a result.
class Worker {
 public:
  Worker(const DaemonOptions& options, Toolchain& toolchain, const Ceilings& ceilings)
      : options_(options), toolchain_(toolchain), ceilings_(ceilings) {}

  // `prepared` runs once the task's evaluator is found or created, before its device work: the
  // worker then starts the compiles of the tasks behind it (a prefetch on arrival is skipped while
  // the worker holds the evaluators' lock).
  template <class F>
  proto::EvaluationResult evaluate(const proto::EvaluateTask& task, F prepared) {
    {
      std::lock_guard lock(flight_mu_);
      prefetched_.erase(task.task_id);
    }
    proto::EvaluationResult r;
    Result<Prepared> p = prepare(task);
    if (!p.is_ok()) {
      // Nothing about the candidate was judged: this evaluator cannot run the task as sent (a
      // target it cannot load, a spec that differs from the coordinator's, another backend).
      // The coordinator gives the task to another evaluator.
      r.outcome = proto::Outcome::kInternalError;
      r.worker_fault = true;
      r.log = p.status().message();
      spdlog::warn("task {}: cannot evaluate here: {}", log_safe(task.task_id), log_safe(r.log, 400));
    } else {
      prepared();
      r = p->evaluator->evaluate(p->candidate, p->dtype);
    }
    r.task_id = task.task_id;
    r.candidate_id = task.candidate_id;
    return r;
  }

  // Starts the compiles of a task that waits behind the running one, so they overlap its device
  // work; evaluate() later finds them in the compile cache, or waits for the one under way.
  // Never blocks: a target whose evaluator does not exist yet (creating one starts a sandbox) or
  // is being created, or 32 compiles already queued, and nothing is started. A task's compiles
  // are started once (on arrival, or when the worker picks the task before it).
  void prefetch(const proto::EvaluateTask& task, CompilePool& pool) {
    {
      std::lock_guard lock(flight_mu_);
      if (prefetched_.count(task.task_id)) return;
    }
    Result<Prepared> p = prepare(task, Lookup::kExistingNow);
    if (!p.is_ok()) return;
    auto requests = p->evaluator->compile_requests(p->candidate, p->dtype);
    if (!requests.is_ok()) return;
    std::lock_guard lock(flight_mu_);
    std::erase_if(in_flight_, [](const std::future<CompileOutput>& f) {
      return f.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
    });
    if (in_flight_.size() > 32) return;
    for (auto& [d, req] : *requests) in_flight_.push_back(pool.submit(std::move(req)));
    prefetched_.insert(task.task_id);
  }

 private:
  struct Prepared {
    CandidateEvaluator* evaluator;
    CandidateSpec candidate;
    DType dtype;
  };

  // kCreate: the worker thread, which may create the target's evaluator. kExistingNow: another
  // thread, which takes only an evaluator that exists, and only when the lock is free.
  enum class Lookup { kCreate, kExistingNow };

  Result<Prepared> prepare(const proto::EvaluateTask& task, Lookup lookup = Lookup::kCreate) {
    if (task.backend != options_.backend) {
      return invalid_argument("this evaluator runs the " + options_.backend + " backend, not " + task.backend);
    }
    CandidateEvaluator* ev = nullptr;
    const TargetSpec* target = nullptr;  // std::map nodes stay put: valid after the lock
    {
      std::unique_lock lock(maps_mu_, std::defer_lock);
      if (lookup == Lookup::kCreate) {
        lock.lock();
        KILN_ASSIGN_OR_RETURN(ev, evaluator_for(task.target));
      } else {
        if (!lock.try_lock()) return unavailable("the worker is busy creating an evaluator");
        auto it = evaluators_.find(task.target);
        if (it == evaluators_.end()) return not_found("no evaluator for this target yet");
        ev = it->second.get();
      }
      target = &targets_.at(task.target);
    }
    const TargetSpec& t = *target;
    if (!task.spec_hash.empty() && task.spec_hash != t.spec_hash) {
      return failed_precondition(
          "target '" + task.target + "' in " +
          (options_.targets_dir.empty() ? std::string("the built-in targets")
                                        : options_.targets_dir) +
          " differs from the coordinator's (spec hash " + t.spec_hash.substr(0, 12) + " here, " +
          task.spec_hash.substr(0, 12) +
          " there): start this evaluator with --targets-dir naming the same target folders");
    }
    const BackendSpec* b = t.backend(options_.backend);
    if (!b)
      return failed_precondition("target '" + task.target + "' has no " + options_.backend +
                                 " kernels here");
    // The task says which kernel the source is; nothing is guessed from its parameters.
    const bool tunable = task.kind == proto::kKindTemplate;
    if (!tunable && task.kind != proto::kKindSeed) {
      return invalid_argument("task names no kernel kind ('" + task.kind +
                              "'; expected seed or template)");
    }
    if (tunable && !b->tunable)
      return failed_precondition("target '" + task.target + "' has no template here");
    const KernelSpec& spec = tunable ? *b->tunable : b->seed;
    Prepared p{ev, candidate_of(spec, task.candidate_id, spec.defines), b->dtypes.front()};
    p.candidate.source = task.source;
    for (const auto& [k, v] : task.params) p.candidate.params[k] = v;
    p.candidate.profile = task.profile;
    if (!task.shape.empty()) p.candidate.shape = task.shape;
    if (!(task.early_stop_us >= 0) || !std::isfinite(task.early_stop_us))
      return invalid_argument("early_stop_us must be a finite number >= 0");
    p.candidate.early_stop_us = task.early_stop_us;
    if (!task.dtypes.empty()) {
      KILN_ASSIGN_OR_RETURN(p.dtype, parse_dtype(task.dtypes.front()));
    }
    return p;
  }

  Result<CandidateEvaluator*> evaluator_for(const std::string& name) {
    if (auto it = evaluators_.find(name); it != evaluators_.end()) return it->second.get();
    if (validate_name(name).is_ok() == false) return invalid_argument("bad target name '" + name + "'");
    KILN_ASSIGN_OR_RETURN(std::string dir, find_target(options_.targets_dir, name));
    Result<TargetSpec> t = load_target(dir);
    if (!t.is_ok()) return t.status();
    targets_[name] = std::move(t).value();
    EvaluatorOptions eo;
    eo.kiln_binary = options_.kiln_binary;
    eo.cache_dir = options_.cache_dir;
    eo.gpu = options_.gpu;
    eo.bandwidth_bytes_per_s = floor_bandwidth(ceilings_);
    eo.matrix_flops_per_s = ceilings_.matrix_flops_per_s;
    eo.attainable_flops_per_s = ceilings_.attainable_flops_per_s;
    KILN_ASSIGN_OR_RETURN(auto ev, CandidateEvaluator::create(targets_[name], options_.backend,
                                                              toolchain_.compiler(), eo));
    return (evaluators_[name] = std::move(ev)).get();
  }

  static Status validate_name(const std::string& name) {
    if (name.empty() || name.find('/') != std::string::npos || name.find("..") != std::string::npos) {
      return invalid_argument("bad target name");
    }
    return Status::ok();
  }

  const DaemonOptions& options_;
  Toolchain& toolchain_;
  Ceilings ceilings_;
  std::mutex maps_mu_;  // guards targets_ and evaluators_ (prefetch reads them from the loop)
  std::map<std::string, TargetSpec> targets_;
  std::map<std::string, std::unique_ptr<CandidateEvaluator>> evaluators_;
  std::mutex flight_mu_;
  std::deque<std::future<CompileOutput>> in_flight_;  // guarded by flight_mu_
  std::set<std::string> prefetched_;                  // task ids; guarded by flight_mu_
};

// Tasks in, results out, between the loop thread and the worker thread.
struct Mailbox {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<proto::EvaluateTask> tasks;
  std::deque<proto::EvaluationResult> results;
  bool closing = false;
};

// The spec hash of every target on the lookup path of `dirs` that loads, the first of each name
// (as evaluator_for() finds them); one that does not load is left out (the coordinator then
// refuses this evaluator for a run that needs it) and logged.
std::map<std::string, std::string> target_hashes(const std::string& dirs) {
  std::map<std::string, std::string> hashes;
  for (const std::string& dir : target_folders(dirs)) {
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
      if (!entry.is_directory() || !std::filesystem::exists(entry.path() / "target.json")) continue;
      Result<TargetSpec> t = load_target(entry.path().string());
      if (t.is_ok())
        hashes.emplace(t->name, t->spec_hash);  // an earlier folder's copy wins
      else
        spdlog::warn("target {} does not load: {}", entry.path().string(), t.status().message());
    }
    if (ec) spdlog::warn("listing targets in {}: {}", dir, ec.message());
  }
  return hashes;
}

std::string default_worker_id(const DaemonOptions& o) {
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  return std::string(host) + "-" + o.backend + std::to_string(o.gpu) + "-" + std::to_string(getpid());
}

}  // namespace

Status run_evaluator_daemon(const DaemonOptions& options_in, const std::atomic<bool>& stop) {
  DaemonOptions options = options_in;
  if (options.worker_id.empty()) options.worker_id = default_worker_id(options);
  if (options.capacity == 0) return invalid_argument("capacity must be at least 1");
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Toolchain> toolchain,
                        Toolchain::create(options.backend, options.cache_dir));
  // The device's measured ceilings (cached per GPU model, or per CPU model and host): they give
  // every result its physical floor, and a time below it is rejected as impossible
  // (docs/threats.md). A GPU daemon measures at every start and keeps the higher figure
  // (ceilings.h); a cpu daemon uses the cache when there is one: its floor has kHostFloorMargin of
  // room, and `kiln run` starts several cpu evaluators at once, each of which would otherwise
  // measure.
  SandboxOptions sb{options.kiln_binary, options.backend, options.gpu};
  KILN_ASSIGN_OR_RETURN(
      Ceilings ceilings,
      load_or_measure_ceilings(
          sb, toolchain->compiler(), options.cache_dir,
          runs_on_gpu(options.backend) ? CeilingsMode::kKeepHigher : CeilingsMode::kUseCache));
  spdlog::info("{}", ceilings_line(ceilings));

  zmq::context_t context(1);
  KILN_ASSIGN_OR_RETURN(net::WorkerLink link, net::WorkerLink::connect(context, options.connect, options.worker_id,
                                                                      options.heartbeat, "an evaluator", options.curve));

  Mailbox box;
  Worker worker(options, *toolchain, ceilings);
  CompilePool pool(toolchain->compiler(), options.compile_threads);
  std::thread worker_thread([&] {
    while (true) {
      proto::EvaluateTask task;
      {
        std::unique_lock lock(box.mu);
        box.cv.wait(lock, [&] { return box.closing || !box.tasks.empty(); });
        if (box.closing) return;
        task = std::move(box.tasks.front());
        box.tasks.pop_front();
      }
      spdlog::info("evaluating task {} ({} on {})", log_safe(task.task_id), log_safe(task.candidate_id), log_safe(task.target));
      proto::EvaluationResult r = worker.evaluate(task, [&] {
        std::vector<proto::EvaluateTask> waiting;
        {
          std::lock_guard lock(box.mu);
          waiting.assign(box.tasks.begin(), box.tasks.end());
        }
        for (const auto& next : waiting) worker.prefetch(next, pool);
      });
      spdlog::info("task {}: {} in {:.0f} ms", log_safe(task.task_id), proto::outcome_name(r.outcome), r.wall_ms);
      std::lock_guard lock(box.mu);
      box.results.push_back(std::move(r));
    }
  });
  auto close_worker = [&] {
    {
      std::lock_guard lock(box.mu);
      box.closing = true;
    }
    box.cv.notify_all();
    worker_thread.join();
  };

  const proto::Hello hello = net::evaluator_hello(
      options.worker_id, options.backend, options.capacity,
      !options.gpu_model.empty() ? options.gpu_model
      : options.backend == "cpu" ? ""
                                 : ceilings.device,
      ceilings.arch, target_hashes(options.targets_dir), toolchain->compiler().toolchain_version());

  auto announce = [&] {
    link.send(hello);
    // Tasks held across a reconnect were handed out by the old connection; the coordinator
    // re-queues them when their leases expire, so credit is offered only for free slots.
    const size_t held = link.tasks_held();
    if (options.capacity > held)
      link.send(proto::Credit{options.capacity - static_cast<uint32_t>(held)});
  };
  announce();
  spdlog::info("evaluator {} connected to {} ({} backend{}, capacity {}, {} target(s))",
               options.worker_id, options.connect, options.backend,
               hello.gpu_model.empty() ? "" : ", " + hello.gpu_model, options.capacity,
               hello.spec_hashes.size());
  Status outcome = Status::ok();

  while (!stop.load()) {
    Result<std::optional<proto::Envelope>> got = link.receive(100);
    if (!got.is_ok()) {
      spdlog::error("receive failed: {}", got.status().to_string());
      break;
    }
    if (got->has_value()) {
      proto::Envelope& env = **got;
      if (auto* task = std::get_if<proto::EvaluateTask>(&env.body)) {
        worker.prefetch(*task, pool);
        std::lock_guard lock(box.mu);
        box.tasks.push_back(std::move(*task));
        box.cv.notify_one();
      } else if (auto* bye = std::get_if<proto::Bye>(&env.body)) {
        if (std::optional<Status> end = link.after_bye(*bye)) {
          outcome = *end;
          break;
        }
      } else {
        link.refuse(env);
      }
    }
    std::deque<proto::EvaluationResult> done;
    {
      std::lock_guard lock(box.mu);
      done.swap(box.results);
    }
    for (auto& r : done) {
      link.send(std::move(r));
      link.send(proto::Credit{1});
    }
    link.keep_alive(stop, announce);
  }
  if (outcome.is_ok()) link.send(proto::Bye{"evaluator stopping", std::string(proto::kByeLeaving)});
  close_worker();
  return outcome;
}

}  // namespace kiln::eval
