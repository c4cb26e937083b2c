// `kiln run`: a whole search on this machine. Starts a private redis-server (AOF on) in the output
// folder unless --redis names one, binds the coordinator's dispatcher on loopback, starts one
// `kiln evaluator` process per GPU (or --evaluators of them on the cpu backend, with a notice when
// there is no GPU), runs the search with the built-in proposer in this process, prints progress
// per target, and on finish or Ctrl-C prints a summary and writes the output folder:
//   <out>/summary.json              every target's standing
//   <out>/best/<target>.json        the best kernel: source, parameters, launch geometry, times
//   <out>/results.jsonl             every evaluation result, one JSON object per line
//   <out>/evaluators.pid            the evaluator processes' pids, one per line
// `--resume` continues the run recorded in the folder's Redis (or --redis) after a crash, a lost
// Redis or Ctrl-C: it restarts the private redis-server from its AOF (stopping one the dead run
// left behind), checks that the recorded run is this one, rebuilds the search from Redis
// (coordinator::Engine::resume) and finishes it with the budget that is left. A lock on
// <out>/.kiln.lock keeps two kiln processes from working in one folder; evaluators die with the
// process that started them (PR_SET_PDEATHSIG), so a killed run leaves none behind.
// What is settled before the search starts (the options checked, where the evaluators run, the
// engine's options) is in run_setup.cc; this file is the run's sequence.
#include "cli/run_cmd.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <thread>

#include "cli/curve_options.h"
#include "cli/local_eval.h"
#include "cli/local_workers.h"
#include "cli/redis_password.h"
#include "cli/resume_command.h"
#include "cli/run_args.h"
#include "cli/run_lease.h"
#include "cli/run_outputs.h"
#include "cli/run_setup.h"
#include "cli/run_support.h"
#include "cli/status_table.h"
#include "cli/stop_signal.h"
#include "coordinator/engine.h"
#include "coordinator/run_observer.h"
#include "coordinator/status_server.h"
#include "evaluator/result_json.h"
#include "evaluator/toolchain.h"
#include "evaluator/triton/triton_compiler.h"
#include "shared/backends.h"
#include "shared/fatal.h"
#include "shared/http_server.h"
#include "shared/local_redis.h"
#include "shared/redis_client.h"
#include "shared/redis_store.h"
#include "shared/target_path.h"
#include "shared/target_spec.h"

extern char** environ;

namespace kiln::cli {

namespace fs = std::filesystem;

int run_search(const RunArgs& args) {
  const char* who = args.coordinator_mode ? "kiln coordinator" : "kiln run";
  auto fail = [who](const std::string& msg) {
    report_fatal(std::string(who) + ": " + msg);
    return 2;
  };
  Result<CheckedRunArgs> checked = check_run_args(args);
  if (!checked.is_ok()) return fail(checked.status().message());
  const RunArgs& a = checked->args;

  // Targets named on the command line are found and loaded before the folder and Redis exist, so
  // that a misspelt name leaves nothing behind (a resume's recorded targets are loaded below).
  std::optional<std::vector<TargetSpec>> named;
  if (a.given.count("targets")) {
    Result<std::vector<TargetSpec>> t = load_named_targets(a.targets_dir, split_list(a.targets));
    if (!t.is_ok()) return fail(t.status().message());
    named = std::move(t).value();
  }

  // The folder, and Redis: a resume reads what to continue from it. A folder made here goes again
  // if the run fails before it is recorded in it.
  NewFolderGuard new_folder(a.out);
  std::error_code ec;
  fs::create_directories(a.out, ec);
  if (ec) return fail("creating " + a.out + ": " + ec.message());
  const std::string out = fs::absolute(a.out).string();
  Result<int> lock = lock_folder(out);
  if (!lock.is_ok()) {
    new_folder.keep();  // another run made it a moment ago and holds it: not ours to remove
    return fail(lock.status().message());
  }
  // CURVE before anything starts: a coordinator on a network address without keys stops here.
  Result<CoordinatorCurve> curve =
      resolve_coordinator_curve(a.curve, a.bind, who, a.coordinator_mode ? "" : out + "/keys");
  if (!curve.is_ok()) return fail(curve.status().message());
  std::unique_ptr<LocalRedis> local;
  std::string url = a.redis;
  if (url.empty()) {
    LocalRedisOptions lo;
    lo.dir = out + "/redis";
    lo.persist = true;
    fs::create_directories(lo.dir, ec);
    if (Status s = stop_stale_redis(lo.dir); !s.is_ok()) return fail(s.message());
    Result<std::unique_ptr<LocalRedis>> r = LocalRedis::start(lo);
    if (!r.is_ok()) {  // its message says what to do where redis-server is missing
      return fail("starting a private redis-server in " + lo.dir + ": " + r.status().message() +
                  " (or use a Redis of your own: --redis URL)");
    }
    local = std::move(r).value();
    url = local->url();
    std::ofstream(lo.dir + "/redis.pid") << local->pid() << "\n";  // for a resume after a crash
  }
  redis::RedisOptions ro;
  ro.url = url;
  // A Redis restart (a failover, a node reboot) stalls the coordinator instead of ending the run:
  // commands wait for Redis to come back for up to --redis-retry.
  Result<std::chrono::seconds> redis_retry = parse_duration(a.redis_retry, "--redis-retry");
  if (!redis_retry.is_ok()) return fail(redis_retry.status().message());
  ro.reconnect_for_ms = static_cast<int>(std::min<int64_t>(redis_retry->count(), 86400) * 1000);
  if (!a.redis_password_file.empty()) {
    if (a.redis.empty()) return fail("--redis-password-file goes with --redis (the private Redis needs none)");
    if (Status s = apply_redis_password_file(a.redis_password_file, ro); !s.is_ok()) return fail(s.message());
  }
  Result<redis::RedisClient> client = connect_when_loaded(ro);
  if (!client.is_ok()) {
    // A private Redis that died while loading its AOF (a damaged file) says why in its log.
    const std::string log = local ? local->log_tail() : "";
    return fail("connecting to Redis at " + redis_url_for_display(url) + ": " +
                client.status().message() +
                (log.empty() ? ""
                             : "; the private redis-server's log ends:\n" + log +
                                   "(a damaged AOF in " + out +
                                   "/redis/appendonlydir can be repaired with "
                                   "redis-check-aof --fix)"));
  }
  // A process killed mid-write leaves the AOF's last command cut short, and Redis loads what is
  // before the cut; a file cut deep down loads the same way, with most of the run gone. Said here,
  // not only in redis.log, since the run continues from what was loaded.
  if (local && local->loaded_truncated_aof()) {
    std::fprintf(stderr,
                 "%s: WARNING: the private Redis's AOF (%s/redis/appendonlydir) was cut short; "
                 "Redis loaded what came before the cut, and the run continues from that (see "
                 "%s/redis/redis.log; a copy of the folder keeps what is there now)\n",
                 who, out.c_str(), out.c_str());
  }
  redis::Store store(*client);
  if (Status s = store.init_schema(); !s.is_ok()) return fail(s.message());
  // Before the run is read: one coordinator per run, however many share this Redis.
  Result<RunLease> lease = RunLease::acquire(*client, who);
  if (!lease.is_ok()) return fail(lease.status().message());
  const std::string where = a.redis.empty() ? out : "Redis at " + redis_url_for_display(a.redis);
  Result<std::optional<coordinator::RunRecord>> recorded = coordinator::read_run_record(store);
  if (!recorded.is_ok()) return fail("reading the run in " + where + ": " + recorded.status().message());
  const std::string resume_hint = run_resume_hint(a, out);
  // --resume-if-any (a scheduler that starts the coordinator again: a Job's pod made anew, a
  // requeued Slurm job): continue a recorded run (a finished one only rewrites the output, as
  // --resume does), start one when there is none.
  const bool resume = a.resume || (a.resume_if_any && *recorded);
  if (a.resume_if_any && *recorded)
    std::fprintf(stderr, "%s: run %s is recorded in %s: continuing it (--resume-if-any)\n", who,
                 (*recorded)->id.c_str(), where.c_str());
  if (!resume && *recorded) {
    const coordinator::RunRecord& r = **recorded;
    std::string names;
    for (const auto& t : r.targets) names += (names.empty() ? "" : ",") + t;
    return fail(where + " already holds run " + r.id + " (" + names + " on " + r.backend + ", " + r.state + "); continue it with `" + resume_hint +
                "`, or choose another " + (a.redis.empty() ? "--out" : "database"));
  }
  if (resume && !*recorded) {
    return fail("nothing to resume: " + where + " holds no run (kiln:run is absent); start a new run without --resume");
  }
  // A resume continues the recorded run: options not named again keep their recorded values.
  const coordinator::RunRecord* rec = resume ? &**recorded : nullptr;
  auto given = [&](const char* option) { return a.given.count(option) != 0; };
  std::vector<std::string> names = rec && !given("targets") ? rec->targets : split_list(a.targets);
  std::string backend = rec && !given("backend") ? rec->backend : a.backend;
  const uint32_t islands = rec && !given("islands") ? rec->islands : a.islands;
  const uint64_t patience = rec && !given("patience") ? rec->patience : a.patience;
  const uint64_t seed = rec && !given("seed") ? rec->seed : a.seed;
  uint32_t local_evaluators = a.evaluators;
  if (rec && !given("evaluators")) {  // kiln:run also notes how many the run started
    Result<std::map<std::string, std::string>> fields = store.get_run();
    if (fields.is_ok() && fields->count("evaluators")) {
      local_evaluators = static_cast<uint32_t>(  // a record edited by hand: at most the bound
          std::min(std::strtoul(fields->at("evaluators").c_str(), nullptr, 10), 256ul));
    }
  }

  // Targets and backend.
  std::vector<TargetSpec> targets;
  if (names.empty()) {  // the user's own folders' targets, else the built-in ones
    Result<std::vector<TargetSpec>> all = load_target_path(a.targets_dir, /*own_only=*/true);
    if (!all.is_ok()) return fail(all.status().message());
    targets = std::move(all).value();
  } else if (named) {  // names are the command line's, loaded above
    targets = std::move(*named);
  } else {
    Result<std::vector<TargetSpec>> t = load_named_targets(a.targets_dir, names);
    if (!t.is_ok()) return fail(t.status().message());
    targets = std::move(t).value();
  }
  Result<RunPlacement> placement = place_run(a, backend, checked->gpus, rec != nullptr);
  if (!placement.is_ok()) return fail(placement.status().message());
  backend = placement->backend;
  const std::vector<int>& gpus = placement->gpus;
  std::vector<TargetSpec> runnable = runnable_targets(std::move(targets), backend);
  if (runnable.empty()) return fail("no target has kernels for the " + backend + " backend");

  // Coordinator, the search (new, or rebuilt from Redis) and evaluators.
  zmq::context_t ctx;
  coordinator::DispatcherOptions dopts;
  // Evaluators must hold the same target specs as this run: one with another copy is refused.
  for (const auto& t : runnable) dopts.spec_hashes[t.name] = t.spec_hash;
  // Triton's version and kiln's compile worker are part of a triton run's candidate ids (below)
  // and of what its evaluators must share, where this machine has Triton.
  std::string triton_toolchain;
  if (backend == "triton") {
    if (auto triton = eval::TritonCompiler::create(); triton.is_ok()) {
      triton_toolchain = (*triton)->toolchain_version();
    }
  }
  dopts.triton_toolchain = triton_toolchain;
  dopts.bind = a.bind;
  dopts.curve = curve->server;
  dopts.allowed = curve->allowed;
  dopts.exact_gpu_models =
      placement->discover_models || placement->gpu_models != std::vector<std::string>{""};
  auto dispatcher = coordinator::Dispatcher::create(ctx, store, dopts);
  if (!dispatcher.is_ok()) return fail("binding the coordinator: " + dispatcher.status().message());
  const size_t count = a.coordinator_mode     ? 0
                       : runs_on_gpu(backend) ? gpus.size()
                                              : std::max<uint32_t>(1, local_evaluators);
  const std::chrono::seconds total_budget =
      rec && !given("budget") ? std::chrono::seconds(rec->budget_s) : checked->budget;
  Result<coordinator::EngineOptions> eo = engine_options(
      *checked, {*placement, total_budget, seed, islands, patience, count, triton_toolchain, rec},
      runnable, who);
  if (!eo.is_ok()) return fail(eo.status().message());
  // The HTTP endpoints: documents built on this thread once a turn, served by the server's own.
  // Started before the run is recorded, so that an address in use leaves no run behind.
  coordinator::RunObserver observer({a.coordinator_mode ? "coordinator" : "run", backend,
                                     static_cast<double>(total_budget.count())});
  std::unique_ptr<coordinator::StatusServer> http;
  if (checked->http_on) {
    coordinator::StatusServerOptions so;
    so.bind = a.http;
    // Alive while the loop could still be waiting out a Redis outage (--redis-retry), plus a
    // minute.
    so.stall_after = std::chrono::milliseconds(ro.reconnect_for_ms) + std::chrono::minutes(1);
    Result<std::unique_ptr<coordinator::StatusServer>> started =
        coordinator::StatusServer::start(so);
    if (!started.is_ok() && a.coordinator_mode && !a.given.count("http")) {
      // The default address is taken (another coordinator on this host): a free port instead of
      // failing a run that never asked for HTTP by name.
      std::fprintf(stderr, "%s: warning: --http %s: %s; serving on a free loopback port instead\n",
                   who, a.http.c_str(), started.status().message().c_str());
      so.bind = "127.0.0.1:0";
      started = coordinator::StatusServer::start(so);
    }
    if (!started.is_ok()) return fail("--http: " + started.status().message());
    http = std::move(started).value();
    std::fprintf(stderr, "%s: status page %s/ (also /status, /metrics, /healthz, /readyz)\n", who,
                 http->url().c_str());
    std::ofstream(out + "/http") << http->url() << "\n";
  }
  coordinator::Engine engine(runnable, **dispatcher, *eo, &store);
  if (Status s = rec ? engine.resume() : engine.begin(); !s.is_ok()) {
    return fail((rec ? "cannot resume: " : "recording the run: ") + s.message());
  }
  if (Status s = store.put_run({{"evaluators", std::to_string(count)}}); !s.is_ok()) return fail(s.message());
  new_folder.keep();  // the run is recorded there: a resume continues it
  if (rec && engine.finished()) {
    std::fprintf(stderr, "%s: run %s in %s had already finished; nothing to search, rewriting its output folder\n",
                 who, engine.record().id.c_str(), where.c_str());
    if (Status w = write_outputs(out, runnable, backend, engine); !w.is_ok()) return fail(w.message());
    lease->release();
    print_status_table(engine.reports(), stdout);
    return 0;
  }
  if (rec) {
    const double left = total_budget.count() > 0 ? std::max(0.0, total_budget.count() - engine.record().spent_s) : 0;
    std::fprintf(stderr, "%s: resuming run %s (%.0f s of search already spent%s)\n", who,
                 engine.record().id.c_str(), engine.record().spent_s,
                 total_budget.count() > 0 ? (", " + std::to_string(static_cast<int64_t>(left)) + " s of the budget left").c_str() : "");
  }
  const std::string self = fs::read_symlink("/proc/self/exe", ec).string();
  const std::string cache = a.cache_dir.empty() ? eval::default_cache_dir() : a.cache_dir;
  LocalWorkers workers(who, out + "/evaluators.pid");
  std::ofstream(out + "/endpoint") << (*dispatcher)->endpoint() << "\n";
  if (a.coordinator_mode) {
    std::fprintf(
        stderr,
        "kiln coordinator: listening on %s; start workers with\n"
        "  kiln evaluator --connect %s --backend %s [--gpu N]%s%s\n",
        (*dispatcher)->endpoint().c_str(), (*dispatcher)->endpoint().c_str(), backend.c_str(),
        a.targets_dir.empty() ? "" : (" --targets-dir " + a.targets_dir).c_str(),
        curve->server.enabled() ? " --curve-secret WORKER.key --coordinator-key COORDINATOR.pub"
                                : "");
  }
  for (size_t i = 0; i < count; ++i) {
    std::vector<std::string> argv = {self,          "evaluator",
                                     "--connect",   (*dispatcher)->endpoint(),
                                     "--backend",   backend,
                                     "--cache-dir", cache,
                                     "--worker-id", "local-" + backend + std::to_string(i)};
    // The same lookup path as ours (without --targets-dir they read $KILN_TARGETS_DIR too).
    if (!a.targets_dir.empty()) argv.insert(argv.end(), {"--targets-dir", a.targets_dir});
    if (runs_on_gpu(backend)) argv.insert(argv.end(), {"--gpu", std::to_string(gpus[i])});
    argv.insert(argv.end(), curve->local_worker_args.begin(), curve->local_worker_args.end());
    Status started =
        workers.start("evaluator " + std::to_string(i), std::move(argv),
                      out + "/evaluator-" + std::to_string(i) + ".log", /*evaluator=*/true);
    if (!started.is_ok()) return fail(started.message());
  }
  if (!a.llm.empty()) {  // an LLM proposal agent beside the built-in proposer (docs/llm.md)
    std::vector<std::string> argv = {self,    "agent", "--connect", (*dispatcher)->endpoint(),
                                     "--llm", a.llm,   "--stats",   out + "/llm-stats.json"};
    if (!a.targets_dir.empty()) argv.insert(argv.end(), {"--targets-dir", a.targets_dir});
    argv.insert(argv.end(), curve->local_worker_args.begin(), curve->local_worker_args.end());
    Status started = workers.start("the LLM agent", std::move(argv), out + "/agent-llm.log",
                                   /*evaluator=*/false);
    if (!started.is_ok()) return fail(started.message());
    std::fprintf(stderr, "%s: LLM agent started with %s (log %s/agent-llm.log)\n", who, a.llm.c_str(), out.c_str());
  }
  std::fprintf(stderr, "kiln run: %zu target(s) on the %s backend, %zu evaluator(s), budget %llds, redis %s, output %s\n",
               runnable.size(), backend.c_str(), count, static_cast<long long>(total_budget.count()),
               redis_url_for_display(url).c_str(), out.c_str());

  auto publish_http = [&] {
    if (!http) return;
    observer.observe(engine, **dispatcher, &store);
    const bool over = engine.finished() || StopOnSignal::requested();
    http->publish(observer.status_json(), observer.metrics_text(), !over,
                  engine.finished() ? "the run is over" : "the coordinator is stopping");
  };
  publish_http();

  std::optional<StopOnSignal> stop_on_signal;
  stop_on_signal.emplace();
  const bool tty = isatty(STDERR_FILENO);
  // Not a terminal (a log file, a pipe): a line per target when something changes, not the whole
  // table every second.
  ProgressLines progress_lines;
  auto publish = [&](const std::vector<coordinator::TargetReport>& reports) {
    for (const auto& r : reports) {  // for `kiln status`
      Status s = store.put_target_status(coordinator::unit_key(r.target, r.gpu_model, r.shape),
                                         status_fields(r));
      if (!s.is_ok()) spdlog::warn("writing the status of {}: {}", r.target, s.to_string());
    }
  };
  Status lease_lost;  // another coordinator took the run over while this one stalled
  Status ran =
      engine.run(StopOnSignal::flag(), [&](const std::vector<coordinator::TargetReport>& reports) {
        if (Status held = lease->renew(); !held.is_ok() && lease_lost.is_ok()) {
          lease_lost = held;
          std::raise(SIGTERM);  // stops the loop as a SIGTERM would
        }
        workers.supervise();  // a local worker that died is started again
        publish(reports);
        publish_http();
        if (!tty) {
          std::fputs(progress_lines.update(reports, ProgressLines::Clock::now()).c_str(), stderr);
          return;
        }
        std::fprintf(stderr, "\033[H\033[2J");
        print_status_table(reports, stderr);
        std::fprintf(stderr, "\n");
      });
  stop_on_signal.reset();  // Ctrl-C during the shutdown below ends the process
  // Workers exit only when the run is over; a coordinator that stops short of that (a failure,
  // Ctrl-C, SIGTERM) tells them to wait for it to come back (`kiln coordinator --resume`).
  if (ran.is_ok() && engine.finished()) {
    (*dispatcher)->shutdown(proto::kByeFinished, "run finished");
  } else {
    (*dispatcher)
        ->shutdown(proto::kByeStopping,
                   ran.is_ok() ? "the coordinator was stopped" : "the coordinator failed");
  }
  workers.stop_all();
  if (!lease_lost.is_ok()) {  // the run is the other coordinator's now: nothing is written
    report_fatal(std::string(who) + ": " + lease_lost.message());
    return 1;
  }
  publish(engine.reports());
  publish_http();
  if (!ran.is_ok()) {
    report_fatal(std::string(who) + ": the search stopped: " + ran.to_string());
    std::fprintf(stderr, "%s: the search state is in Redis%s; once it is reachable again, continue with: %s\n", who,
                 a.redis.empty() ? (" (its AOF is in " + out + "/redis)").c_str() : "", resume_hint.c_str());
  }
  if (StopOnSignal::requested()) {
    std::fprintf(stderr, "%s: interrupted; writing what was found (continue with: %s)\n", who, resume_hint.c_str());
  }
  if (total_budget.count() > 0 && engine.overrun_s() > 0.5) {
    std::fprintf(stderr,
                 "%s: search time %.0f s, %.0f s past the budget of %lld s (evaluations in flight "
                 "are waited for "
                 "up to %lld s after it%s)\n",
                 who, engine.record().spent_s, engine.overrun_s(),
                 static_cast<long long>(total_budget.count()),
                 static_cast<long long>(engine.grace().count()),
                 engine.abandoned() > 0
                     ? (": " + std::to_string(engine.abandoned()) + " abandoned").c_str()
                     : "");
  }
  if (Status w = write_outputs(out, runnable, backend, engine); !w.is_ok()) return fail(w.message());
  if (ran.is_ok()) lease->release();
  std::printf("\n");
  print_status_table(engine.reports(), stdout);
  print_winners(engine.reports(), "--out " + shell_quote(out), backend, stdout);
  std::printf("\nbest kernels, summary.json and results.jsonl are in %s\n", out.c_str());
  return ran.is_ok() ? 0 : 1;
}

}  // namespace kiln::cli
