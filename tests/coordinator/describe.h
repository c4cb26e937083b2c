// Helpers of the engine tests: one-line descriptions of the engine's state (individuals,
// populations, reports) for tests that compare an engine rebuilt from Redis with the one that
// wrote it, a dispatcher with test heartbeats, and a run that can never hang the suite.
#pragma once

#include <atomic>
#include <chrono>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "coordinator/engine.h"
#include "coordinator/search.h"

namespace kiln::coordinator {

inline std::string describe(const Individual& i) {
  std::ostringstream s;
  s << i.id << " params=";
  for (const auto& [k, v] : i.params) s << k << "=" << v << ",";
  s << " t=" << i.median_us << " noise=" << i.noise_rel << " parent=" << i.parent_id << " op=" << i.op
    << " gen=" << i.generation << " island=" << i.island << " children=" << i.children;
  return s.str();
}

inline std::vector<std::string> describe(const Population& p) {
  std::vector<std::string> out;
  for (size_t i = 0; i < p.islands().size(); ++i) {
    for (const Individual& e : p.island(i).elites()) out.push_back(std::to_string(i) + ": " + describe(e));
  }
  out.push_back("crowned: " + (p.crowned() ? describe(*p.crowned()) : "-"));
  out.push_back("pending crown: " + (p.pending_crown() ? describe(*p.pending_crown()) : "-"));
  out.push_back("proposals since improvement: " + std::to_string(p.proposals_since_improvement()));
  out.push_back("accepted: " + std::to_string(p.accepted()));
  return out;
}

inline std::string describe(const TargetReport& r) {
  std::ostringstream s;
  s << r.target << "@" << r.gpu_model << " state=" << r.state << " evals=" << r.evaluations << " fails=" << r.failures
    << " accepted=" << r.accepted << " seed=" << r.seed_us << " best=" << r.best_us << " id=" << r.best_id
    << " label=" << r.best_label << " floor=" << r.fraction_of_floor << " source=" << r.best_source.size();
  return s.str();
}

// A dispatcher on `store` with fast heartbeats and a patient liveness, as the engine tests use.
inline std::unique_ptr<Dispatcher> test_dispatcher(zmq::context_t& ctx, redis::Store& store) {
  DispatcherOptions o;
  o.heartbeat.interval_ms = 50;
  o.heartbeat.liveness = 10;
  auto d = Dispatcher::create(ctx, store, o);
  EXPECT_TRUE(d.is_ok()) << d.status().to_string();
  return d.is_ok() ? std::move(d).value() : nullptr;
}

// Runs `engine` until it finishes, `stop` is set (by a worker's limit), or `seconds` pass (then
// `stop` is set, so a stuck search cannot hang the suite); returns what run() returned.
inline Status run_engine(Engine& engine, std::atomic<bool>& stop, int seconds) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  std::atomic<bool> done{false};
  std::thread guard([&] {
    while (!done.load() && !stop.load() && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    stop.store(true);
  });
  Status ran = engine.run(stop, nullptr);
  done.store(true);
  guard.join();
  return ran;
}

}  // namespace kiln::coordinator
