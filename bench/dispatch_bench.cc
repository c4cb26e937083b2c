// Coordinator overhead: how many evaluations per second the dispatcher hands out and merges when
// the evaluators answer instantly, and how many Redis commands each evaluation costs.
//   build/bench/kiln_bench_dispatch [--tasks N] [--workers W] [--credits C]
// It starts a private redis-server (unix socket), binds the dispatcher on loopback TCP, runs W
// simulated evaluators (threads with a DEALER each: hello, C credits, and a result for every task
// the moment it arrives, then one more credit), submits N tasks and polls until all are merged.
// Redis commands are counted with INFO commandstats before and after.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "coordinator/dispatcher.h"
#include "shared/local_redis.h"
#include "shared/worker_link.h"
#include "shared/redis_client.h"
#include "shared/redis_store.h"

using namespace kiln;

namespace {

// Sum of "calls=" over INFO commandstats.
long long redis_calls(redis::RedisClient& c) {
  auto r = c.command({"INFO", "commandstats"});
  if (!r.is_ok()) return -1;
  long long total = 0;
  const std::string& s = r->str;
  for (size_t p = s.find("calls="); p != std::string::npos; p = s.find("calls=", p + 1)) {
    total += std::atoll(s.c_str() + p + 6);
  }
  return total;
}

void simulated_evaluator(zmq::context_t& ctx, const std::string& endpoint, int id, uint32_t credits,
                         const std::atomic<bool>& stop) {
  auto d = net::DealerSocket::connect(ctx, endpoint, net::SocketOptions{});
  if (!d.is_ok()) return;
  proto::IdGenerator ids("sim" + std::to_string(id));
  auto send = [&](proto::Message m) { (void)d->send(proto::encode({proto::kProtocolVersion, ids.next(), std::move(m)})); };
  send(net::evaluator_hello("sim" + std::to_string(id), "cpu", credits, "", "cpu/bench", {}));
  send(proto::Credit{credits});
  while (!stop.load()) {
    auto got = d->receive(20);
    if (!got.is_ok() || !got->has_value()) continue;
    auto env = proto::decode(**got);
    if (!env.is_ok()) continue;
    if (auto* t = std::get_if<proto::EvaluateTask>(&env->body)) {
      proto::EvaluationResult r;
      r.task_id = t->task_id;
      r.candidate_id = t->candidate_id;
      r.arch = "cpu/bench";
      r.outcome = proto::Outcome::kVerified;
      for (std::string_view stage : proto::kVerifiedStages)
        r.stages.push_back({std::string(stage), true, "", 0, 1});
      r.timing.median_us = 100;
      r.timing.samples = 10;
      send(std::move(r));
      send(proto::Credit{1});
    } else if (std::holds_alternative<proto::Heartbeat>(env->body)) {
      send(proto::Heartbeat{});
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  size_t tasks = 20000;
  int workers = 4;
  uint32_t credits = 8;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--tasks")) tasks = std::strtoull(argv[i + 1], nullptr, 10);
    else if (!std::strcmp(argv[i], "--workers")) workers = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--credits")) credits = static_cast<uint32_t>(std::atoi(argv[i + 1]));
  }
  const std::string dir = std::filesystem::temp_directory_path() / ("kiln-bench-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  LocalRedisOptions lo;
  lo.dir = dir;
  auto server = LocalRedis::start(lo);
  if (!server.is_ok()) {
    std::fprintf(stderr, "redis: %s\n", server.status().to_string().c_str());
    return 1;
  }
  redis::RedisOptions ro;
  ro.url = (*server)->url();
  auto client = redis::RedisClient::connect(ro);
  auto stats_client = redis::RedisClient::connect(ro);
  if (!client.is_ok() || !stats_client.is_ok()) return 1;
  redis::Store store(*client);
  (void)store.init_schema();
  zmq::context_t ctx;
  auto dispatcher = coordinator::Dispatcher::create(ctx, store, {});
  if (!dispatcher.is_ok()) return 1;
  std::atomic<bool> stop{false};
  std::vector<std::thread> sims;
  for (int w = 0; w < workers; ++w) {
    sims.emplace_back(simulated_evaluator, std::ref(ctx), (*dispatcher)->endpoint(), w, credits, std::cref(stop));
  }
  // Let the workers say hello before the clock starts.
  for (int i = 0; i < 50 && (*dispatcher)->workers() < static_cast<size_t>(workers); ++i) (void)(*dispatcher)->poll(10);
  for (size_t i = 0; i < tasks; ++i) {
    proto::EvaluateTask t;
    t.task_id = "bench-" + std::to_string(i);
    t.candidate_id = "c" + std::to_string(i);
    t.target = "rmsnorm";
    t.backend = "cpu";
    t.source = std::string(2000, 'x');  // a kernel-sized payload
    (*dispatcher)->submit(std::move(t));
  }
  const long long calls_before = redis_calls(*stats_client);
  const auto start = std::chrono::steady_clock::now();
  size_t merged = 0;
  while (merged < tasks) {
    auto got = (*dispatcher)->poll(1);
    if (!got.is_ok()) {
      std::fprintf(stderr, "poll: %s\n", got.status().to_string().c_str());
      break;
    }
    merged += got->size();
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const long long calls = redis_calls(*stats_client) - calls_before - 1;  // minus the INFO itself
  stop.store(true);
  for (auto& t : sims) t.join();
  std::printf("tasks %zu, simulated evaluators %d (credits %u each), cores %u\n", tasks, workers, credits,
              std::thread::hardware_concurrency());
  std::printf("dispatched and merged: %zu in %.3f s = %.0f evaluations/s\n", merged, s, merged / s);
  std::printf("redis commands: %lld = %.2f per evaluation, in 3 round trips (lease script: EVALSHA\n"
              "  + SET + ZADD; result: SET NX; release script: EVALSHA + DEL + ZREM)\n",
              calls, static_cast<double>(calls) / merged);
  std::filesystem::remove_all(dir);
  return merged == tasks ? 0 : 1;
}
