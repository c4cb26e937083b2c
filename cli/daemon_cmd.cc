// `kiln evaluator --connect tcp://HOST:PORT [--gpu N]`: runs the evaluator daemon until SIGINT or
// SIGTERM (finishing the evaluation in progress) or until the coordinator says bye.
#include "cli/daemon_cmd.h"

#include <spdlog/spdlog.h>

#include <cstdio>
#include <filesystem>

#include "cli/curve_options.h"
#include "cli/option_checks.h"
#include "cli/stop_signal.h"
#include "evaluator/daemon.h"
#include "evaluator/toolchain.h"
#include "shared/endpoint.h"
#include "shared/fatal.h"
#include "shared/target_path.h"

namespace kiln::cli {
namespace {

int run_daemon(eval::DaemonOptions options, const WorkerCurveArgs& curve) {
  // Before the ceilings are measured (seconds): a bad endpoint is a typo to fix now.
  if (Status s = net::validate_endpoint(options.connect, net::EndpointUse::kConnect); !s.is_ok()) {
    report_fatal("kiln evaluator: --connect " + s.message());
    return 2;
  }
  Result<net::CurveClient> keys = resolve_worker_curve(curve, options.connect, "kiln evaluator");
  if (!keys.is_ok()) {
    report_fatal("kiln evaluator: " + keys.status().message());
    return 2;
  }
  options.curve = std::move(keys).value();
  options.kiln_binary = std::filesystem::read_symlink("/proc/self/exe").string();
  if (Status s = check_target_folders(options.targets_dir); !s.is_ok()) {
    report_fatal("kiln evaluator: " + s.message());
    return 2;
  }
  if (options.cache_dir.empty()) options.cache_dir = eval::default_cache_dir();
  if (Status s = eval::make_cache_dir(options.cache_dir); !s.is_ok()) {
    report_fatal("kiln evaluator: " + s.message());
    return 2;
  }
  StopOnSignal stop(StopOnSignal::Syscalls::kInterrupt);
  Status s = eval::run_evaluator_daemon(options, StopOnSignal::flag());
  if (!s.is_ok()) {
    report_fatal("kiln evaluator: " + s.message());
    return s.code() == StatusCode::kInvalidArgument ? 2 : 1;
  }
  return 0;
}

}  // namespace

void add_evaluator_command(CLI::App& app, std::function<int()>& action) {
  auto o = std::make_shared<eval::DaemonOptions>();
  auto curve = std::make_shared<WorkerCurveArgs>();
  CLI::App* sub = app.add_subcommand(
      "evaluator",
      "Run an evaluator daemon for one GPU (or the cpu backend): connects to the coordinator,\n"
      "announces itself, takes `evaluate` tasks within its capacity and returns verified, timed\n"
      "results. Heartbeats both ways; reconnects with back-off when the coordinator goes silent.\n"
      "Stop with SIGINT/SIGTERM (the evaluation in progress finishes first).");
  sub->add_option("--connect", o->connect, "Coordinator endpoint, e.g. tcp://10.0.0.5:5555")->required();
  sub->add_option("--backend", o->backend, "cuda, cpu or triton (Triton kernels, on the GPU)")
      ->check(CLI::IsMember({"cuda", "cpu", "triton"}))
      ->capture_default_str();
  sub->add_option("--gpu", o->gpu, "GPU ordinal (one daemon per GPU)")->capture_default_str();
  sub->add_option("--capacity", o->capacity, "Tasks held at once (1 to 1024)")
      ->check(CLI::Range(1u, 1024u))
      ->capture_default_str();
  sub->add_option("--compile-threads", o->compile_threads,
                  "Threads compiling waiting tasks while one runs (1 to 256)")
      ->check(CLI::Range(1u, 256u))
      ->capture_default_str();
  sub->add_option("--worker-id", o->worker_id, "Stable id (default: host-backendN-pid)")
      ->check(printable_name());
  sub->add_option("--gpu-model", o->gpu_model,
                  "The model to announce (default: the GPU's name; none on the cpu backend). A\n"
                  "coordinator with --gpu-models auto keeps one population per model: name the\n"
                  "machine kind on the cpu backend, or tell apart GPUs that share a name (MIG\n"
                  "slices, power limits). Evaluators that announce one name must time alike.")
      ->check(printable_name());
  sub->add_option("--cache-dir", o->cache_dir, "Compile/reference/ceilings cache (default: ~/.cache/kiln)");
  sub->add_option("--targets-dir", o->targets_dir,
                  "Folders of your own targets, A:B (or A,B), looked up before the built-in ones;\n"
                  "default: $KILN_TARGETS_DIR (the coordinator's targets must be the same)");
  sub->add_option("--heartbeat-ms", o->heartbeat.interval_ms, "Heartbeat interval (100 to 60000)")
      ->check(CLI::Range(100, 60000))
      ->capture_default_str();
  add_worker_curve_options(sub, *curve);
  sub->callback([&action, o, curve] { action = [o, curve] { return run_daemon(*o, *curve); }; });
}

}  // namespace kiln::cli
