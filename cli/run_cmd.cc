// `kiln run`: a whole search on this machine. Starts a private redis-server (AOF on) in the output
// folder unless --redis names one, binds the coordinator's dispatcher on loopback, starts one
// `kiln evaluator` process per GPU (or --evaluators of them on the cpu backend, with a notice when
// there is no GPU), runs the search with the built-in proposer in this process, prints progress
// per target, and on finish or Ctrl-C prints a summary and writes the output folder:
//   <out>/summary.json              every target's standing
//   <out>/best/<target>.json        the best kernel: source, parameters, launch geometry, times
//   <out>/results.jsonl             every evaluation result, one JSON object per line
//   <out>/evaluators.pid            the evaluator processes' pids, one per line
#include "cli/run_cmd.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <cstring>
#include <thread>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "cli/status_table.h"
#include "coordinator/engine.h"
#include "evaluator/cuda/cuda_probe.h"
#include "evaluator/result_json.h"
#include "evaluator/toolchain.h"
#include "shared/build_info.h"
#include "shared/local_redis.h"
#include "shared/redis_client.h"
#include "shared/redis_store.h"
#include "shared/target_spec.h"

extern char** environ;

namespace kiln::cli {
namespace {

namespace fs = std::filesystem;

struct RunArgs {
  std::string targets;
  std::string backend;
  std::string gpus;
  std::string budget = "10m";
  std::string redis;
  std::string out = "kiln-run";
  std::string targets_dir;
  std::string cache_dir;
  uint32_t evaluators = 1;
  uint32_t patience = 64;
  uint32_t islands = 2;
  uint64_t seed = 1;
  bool resume = false;
  // `kiln coordinator`: no local evaluators; workers connect to `bind` from anywhere.
  bool coordinator_mode = false;
  std::string bind = "tcp://0.0.0.0:5555";
  uint32_t in_flight = 8;
};

std::atomic<bool> g_stop{false};
void on_signal(int) { g_stop.store(true); }

// "90s", "30m", "2h" or plain seconds.
Result<std::chrono::seconds> parse_duration(const std::string& text) {
  if (text.empty()) return invalid_argument("--budget: empty");
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(text, &used);
  } catch (...) {
    return invalid_argument("--budget: '" + text + "' is not a duration like 90s, 30m or 2h");
  }
  const std::string unit = text.substr(used);
  double scale = unit.empty() || unit == "s" ? 1 : unit == "m" ? 60 : unit == "h" ? 3600 : -1;
  if (scale < 0 || v < 0) return invalid_argument("--budget: '" + text + "' is not a duration like 90s, 30m or 2h");
  return std::chrono::seconds(static_cast<int64_t>(v * scale));
}

// A child process killed (SIGTERM, then SIGKILL) when this object goes away.
class Child {
 public:
  static Result<std::unique_ptr<Child>> spawn(const std::vector<std::string>& argv, const std::string& log) {
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    posix_spawn_file_actions_adddup2(&fa, STDOUT_FILENO, STDERR_FILENO);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    pid_t pid = -1;
    int rc = posix_spawn(&pid, args[0], &fa, nullptr, args.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) return unavailable("starting " + argv[0] + ": " + std::strerror(rc));
    return std::unique_ptr<Child>(new Child(pid));
  }
  ~Child() {
    if (pid_ <= 0) return;
    kill(pid_, SIGTERM);
    for (int i = 0; i < 50; ++i) {
      if (waitpid(pid_, nullptr, WNOHANG) == pid_) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  pid_t pid() const { return pid_; }

 private:
  explicit Child(pid_t pid) : pid_(pid) {}
  pid_t pid_;
};

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) if (!item.empty()) out.push_back(item);
  return out;
}

Status write_outputs(const std::string& out, const std::vector<TargetSpec>& targets, const std::string& backend,
                     const coordinator::Engine& engine) {
  std::error_code ec;
  fs::create_directories(fs::path(out) / "best", ec);
  if (ec) return unavailable("creating " + out + "/best: " + ec.message());
  nlohmann::json summary = nlohmann::json::array();
  for (const auto& r : engine.reports()) {
    nlohmann::json j = {{"target", r.target}, {"state", r.state}, {"evaluations", r.evaluations},
                        {"failures", r.failures}, {"accepted", r.accepted}, {"seed_us", r.seed_us},
                        {"best_us", r.best_us}, {"fraction_of_floor", r.fraction_of_floor},
                        {"best_id", r.best_id}, {"best", r.best_label}, {"backend", backend}};
    summary.push_back(j);
    if (r.best_id.empty()) continue;
    const TargetSpec* spec = nullptr;
    for (const auto& t : targets) if (t.name == r.target) spec = &t;
    nlohmann::json best = j;
    best["params"] = r.best_params;
    best["source"] = r.best_source;
    if (spec && spec->backend(backend)) {
      const BackendSpec& b = *spec->backend(backend);
      const KernelSpec& k = r.best_label == "seed" || !b.tunable ? b.seed : *b.tunable;
      best["kernel"] = k.kernel_name;
      best["grid"] = {k.grid[0], k.grid[1], k.grid[2]};
      best["block"] = {k.block[0], k.block[1], k.block[2]};
      best["shared_bytes"] = k.shared_bytes;
      best["benchmark_shape"] = spec->benchmark_for(backend);
    }
    for (const auto& res : engine.results()) {
      if (res.candidate_id == r.best_id && res.outcome == proto::Outcome::kVerified) {
        best["verification"] = eval::result_to_json(res);  // the last verified run of it
      }
    }
    std::ofstream(fs::path(out) / "best" / (r.target + ".json")) << best.dump(2) << "\n";
  }
  std::ofstream(fs::path(out) / "summary.json") << summary.dump(2) << "\n";
  std::ofstream all(fs::path(out) / "results.jsonl");
  for (const auto& res : engine.results()) all << eval::result_to_json(res).dump() << "\n";
  return Status::ok();
}

int run_search(const RunArgs& a) {
  auto fail = [](const std::string& msg) {
    std::fprintf(stderr, "kiln run: %s\n", msg.c_str());
    return 2;
  };
  if (a.resume) return fail("--resume arrives with the rest of step 4 (restart-safe search state); start a new run");
  Result<std::chrono::seconds> budget = parse_duration(a.budget);
  if (!budget.is_ok()) return fail(budget.status().message());

  // Targets and backend.
  const std::string root = a.targets_dir.empty() ? default_targets_dir() : a.targets_dir;
  std::vector<TargetSpec> targets;
  std::vector<std::string> names = split(a.targets);
  if (names.empty()) {
    Result<std::vector<TargetSpec>> all = load_targets(root);
    if (!all.is_ok()) return fail(all.status().message());
    targets = std::move(all).value();
  } else {
    for (const auto& n : names) {
      Result<TargetSpec> t = load_target(root + "/" + n);
      if (!t.is_ok()) return fail(t.status().message() + " (list targets with `kiln targets`)");
      targets.push_back(std::move(t).value());
    }
  }
  std::string backend = a.backend;
  std::vector<int> gpus;
  for (const auto& g : split(a.gpus)) gpus.push_back(std::atoi(g.c_str()));
  if (backend.empty() && a.coordinator_mode) backend = "cuda";  // the workers' backend, not ours
  if (backend.empty()) {
#ifdef KILN_HAVE_CUDA
    cuda::CudaProbe p = cuda::probe_cuda();
    backend = !p.gpus.empty() && p.nvrtc_loaded ? "cuda" : "cpu";
    if (backend == "cpu") {
      std::fprintf(stderr, "kiln run: NOTICE: no usable GPU (%s); searching on the cpu backend\n",
                   !p.driver_error.empty() ? p.driver_error.c_str() : p.gpus.empty() ? "no devices" : p.nvrtc_error.c_str());
    } else if (gpus.empty()) {
      for (size_t i = 0; i < p.gpus.size(); ++i) gpus.push_back(static_cast<int>(i));
    }
#else
    backend = "cpu";
    std::fprintf(stderr, "kiln run: NOTICE: built without the CUDA backend; searching on the cpu backend\n");
#endif
  }
  if (backend == "cuda" && gpus.empty()) gpus.push_back(0);
  std::vector<TargetSpec> runnable;
  for (auto& t : targets) {
    if (t.backend(backend)) runnable.push_back(std::move(t));
    else std::fprintf(stderr, "kiln run: %s has no %s kernels; skipped\n", t.name.c_str(), backend.c_str());
  }
  if (runnable.empty()) return fail("no target has kernels for the " + backend + " backend");

  // Redis.
  std::error_code ec;
  fs::create_directories(a.out, ec);
  if (ec) return fail("creating " + a.out + ": " + ec.message());
  const std::string out = fs::absolute(a.out).string();
  std::unique_ptr<LocalRedis> local;
  std::string url = a.redis;
  if (url.empty()) {
    LocalRedisOptions lo;
    lo.dir = out + "/redis";
    lo.persist = true;
    fs::create_directories(lo.dir, ec);
    Result<std::unique_ptr<LocalRedis>> r = LocalRedis::start(lo);
    if (!r.is_ok()) return fail("starting a private redis-server: " + r.status().message() +
                                " (install redis-server, or pass --redis URL)");
    local = std::move(r).value();
    url = local->url();
  }
  redis::RedisOptions ro;
  ro.url = url;
  Result<redis::RedisClient> client = redis::RedisClient::connect(ro);
  if (!client.is_ok()) return fail("connecting to Redis at " + url + ": " + client.status().message());
  redis::Store store(*client);
  if (Status s = store.init_schema(); !s.is_ok()) return fail(s.message());

  // Coordinator and evaluators.
  zmq::context_t ctx;
  coordinator::DispatcherOptions dopts;
  if (a.coordinator_mode) dopts.bind = a.bind;
  auto dispatcher = coordinator::Dispatcher::create(ctx, store, dopts);
  if (!dispatcher.is_ok()) return fail("binding the coordinator: " + dispatcher.status().message());
  const std::string self = fs::read_symlink("/proc/self/exe", ec).string();
  const std::string cache = a.cache_dir.empty() ? eval::default_cache_dir() : a.cache_dir;
  std::vector<std::unique_ptr<Child>> evaluators;
  const size_t count = a.coordinator_mode ? 0 : backend == "cuda" ? gpus.size() : std::max<uint32_t>(1, a.evaluators);
  std::ofstream(out + "/endpoint") << (*dispatcher)->endpoint() << "\n";
  if (a.coordinator_mode) {
    std::fprintf(stderr, "kiln coordinator: listening on %s; start workers with\n"
                         "  kiln evaluator --connect %s --backend %s [--gpu N]\n",
                 (*dispatcher)->endpoint().c_str(), (*dispatcher)->endpoint().c_str(), backend.c_str());
  }
  for (size_t i = 0; i < count; ++i) {
    std::vector<std::string> argv = {self, "evaluator", "--connect", (*dispatcher)->endpoint(), "--backend",
                                     backend, "--targets-dir", root, "--cache-dir", cache, "--worker-id",
                                     "local-" + backend + std::to_string(i)};
    if (backend == "cuda") argv.insert(argv.end(), {"--gpu", std::to_string(gpus[i])});
    auto child = Child::spawn(argv, out + "/evaluator-" + std::to_string(i) + ".log");
    if (!child.is_ok()) return fail(child.status().message());
    evaluators.push_back(std::move(child).value());
  }
  {  // for operators and fault tests: which processes are this run's evaluators
    std::ofstream pids(out + "/evaluators.pid");
    for (const auto& e : evaluators) pids << e->pid() << "\n";
  }
  std::fprintf(stderr, "kiln run: %zu target(s) on the %s backend, %zu evaluator(s), budget %s, redis %s, output %s\n",
               runnable.size(), backend.c_str(), count, a.budget.c_str(), url.c_str(), out.c_str());

  coordinator::EngineOptions eo;
  eo.backend = backend;
  eo.budget = *budget;
  eo.seed = a.seed;
  eo.search.islands = a.islands;
  eo.limits.max_proposals_without_gain = a.patience;
  eo.in_flight_per_target = a.coordinator_mode ? a.in_flight : static_cast<uint32_t>(std::max<size_t>(2, count * 2));
  eo.toolchain = std::string("kiln ") + KILN_VERSION + " " + backend;
  coordinator::Engine engine(runnable, **dispatcher, eo);
  signal(SIGINT, on_signal);
  signal(SIGTERM, on_signal);
  const bool tty = isatty(STDERR_FILENO);
  auto publish = [&](const std::vector<coordinator::TargetReport>& reports) {
    for (const auto& r : reports) {  // for `kiln status`
      Status s = store.put_target_status(r.target, status_fields(r));
      if (!s.is_ok()) spdlog::warn("writing the status of {}: {}", r.target, s.to_string());
    }
  };
  Status ran = engine.run(g_stop, [&](const std::vector<coordinator::TargetReport>& reports) {
    publish(reports);
    if (tty) std::fprintf(stderr, "\033[H\033[2J");
    print_status_table(reports, stderr);
    std::fprintf(stderr, "\n");
  });
  signal(SIGINT, SIG_DFL);
  signal(SIGTERM, SIG_DFL);
  (*dispatcher)->shutdown("run finished");
  publish(engine.reports());
  if (!ran.is_ok()) std::fprintf(stderr, "kiln run: the search stopped: %s\n", ran.to_string().c_str());
  if (g_stop.load()) std::fprintf(stderr, "kiln run: interrupted; writing what was found\n");
  if (Status w = write_outputs(out, runnable, backend, engine); !w.is_ok()) return fail(w.message());
  std::printf("\n");
  print_status_table(engine.reports(), stdout);
  std::printf("\nbest kernels, summary.json and results.jsonl are in %s\n", out.c_str());
  return ran.is_ok() ? 0 : 1;
}

}  // namespace

void add_coordinator_command(CLI::App& app, std::function<int()>& action) {
  auto a = std::make_shared<RunArgs>();
  a->coordinator_mode = true;
  a->out = "kiln-coordinator";
  CLI::App* sub = app.add_subcommand(
      "coordinator",
      "Run the search for a farm: binds the coordinator's ROUTER where evaluators on other\n"
      "machines connect (`kiln evaluator --connect tcp://THIS_HOST:PORT`), keeps its state in\n"
      "Redis (--redis for a shared one; else a private one in --out), runs the built-in proposer,\n"
      "and writes the same output folder as `kiln run`. The endpoint is also written to\n"
      "<out>/endpoint.");
  sub->add_option("--bind", a->bind, "ZeroMQ endpoint to bind (tcp://*:5555; port * picks a free one)")->capture_default_str();
  sub->add_option("--backend", a->backend, "Backend of the evaluators (cuda or cpu; default cuda)");
  sub->add_option("--targets", a->targets, "Comma-separated targets (default: all built-in)");
  sub->add_option("--budget", a->budget, "Time for the whole run: 90s, 30m, 2h")->capture_default_str();
  sub->add_option("--patience", a->patience, "A target converges after this many proposals without a gain")->capture_default_str();
  sub->add_option("--in-flight", a->in_flight, "Evaluations queued or running per target")->capture_default_str();
  sub->add_option("--islands", a->islands, "Islands per target")->capture_default_str();
  sub->add_option("--seed", a->seed, "Random seed of the search")->capture_default_str();
  sub->add_option("--redis", a->redis, "Redis URL (default: a private redis-server in --out)");
  sub->add_option("--out", a->out, "Output folder")->capture_default_str();
  sub->add_option("--targets-dir", a->targets_dir, "Folder of targets (default: built-in)");
  sub->callback([&action, a] { action = [a] { return run_search(*a); }; });
}

void add_run_command(CLI::App& app, std::function<int()>& action) {
  auto a = std::make_shared<RunArgs>();
  CLI::App* sub = app.add_subcommand(
      "run",
      "Search for fast kernels on this machine: a private redis-server (AOF on), the coordinator,\n"
      "one evaluator per GPU (or the cpu backend, with a notice, where there is none) and the\n"
      "built-in proposer. Shows progress per target; on finish or Ctrl-C prints a summary and\n"
      "writes the best kernel of each target and every result to --out.");
  sub->add_option("--targets", a->targets, "Comma-separated targets (default: all built-in)");
  sub->add_option("--backend", a->backend, "cuda or cpu (default: cuda when a GPU is usable)");
  sub->add_option("--gpus", a->gpus, "Comma-separated GPU ordinals (default: every visible GPU)");
  sub->add_option("--evaluators", a->evaluators, "cpu backend: evaluator processes to start")->capture_default_str();
  sub->add_option("--budget", a->budget, "Time for the whole run: 90s, 30m, 2h")->capture_default_str();
  sub->add_option("--patience", a->patience, "A target converges after this many proposals without a gain")->capture_default_str();
  sub->add_option("--islands", a->islands, "Islands per target")->capture_default_str();
  sub->add_option("--seed", a->seed, "Random seed of the search")->capture_default_str();
  sub->add_option("--redis", a->redis, "Use this Redis (redis://host:port or unix:///path) instead of a private one");
  sub->add_option("--out", a->out, "Output folder (also holds the private redis and the evaluator logs)")->capture_default_str();
  sub->add_option("--targets-dir", a->targets_dir, "Folder of targets (default: built-in)");
  sub->add_option("--cache-dir", a->cache_dir, "Compile/reference/ceilings cache (default: ~/.cache/kiln)");
  sub->add_flag("--resume", a->resume, "Continue a run (not yet available)");
  sub->callback([&action, a] { action = [a] { return run_search(*a); }; });
}

}  // namespace kiln::cli
