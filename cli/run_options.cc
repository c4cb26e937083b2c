// The options of `kiln run` and `kiln coordinator` (the search itself is run_cmd.cc).
#include <memory>

#include "cli/curve_options.h"
#include "cli/redis_password.h"
#include "cli/run_args.h"
#include "cli/run_cmd.h"

namespace kiln::cli {
namespace {

// The options `kiln run` and `kiln coordinator` share, with the same meaning in both.
void add_common_search_options(CLI::App* sub, const std::shared_ptr<RunArgs>& a) {
  sub->add_option(
      "--targets", a->targets,
      "Comma-separated targets (default: every one in --targets-dir, else every built-in one)");
  sub->add_option("--budget", a->budget, "Time for the whole run: 90s, 30m, 2h")
      ->capture_default_str();
  sub->add_option(
         "--redis-retry", a->redis_retry,
         "How long the coordinator waits for Redis to come back after losing it (a restart,\n"
         "a failover) before it stops the run; workers keep their work meanwhile: 30s, 5m, 1h")
      ->capture_default_str();
  sub->add_option("--patience", a->patience,
                  "A target converges after this many proposals without a gain")
      ->capture_default_str();
  sub->add_option("--islands", a->islands, "Islands per target (at least 1)")
      ->capture_default_str();
  sub->add_option("--seed", a->seed, "Random seed of the search")->capture_default_str();
  sub->add_flag(
      "--resume-if-any", a->resume_if_any,
      "--resume when a run is recorded, else start a new one (a finished run only rewrites\n"
      "the output folder), for schedulers that start the coordinator again: Kubernetes\n"
      "Jobs, Slurm --requeue");
  sub->add_option(
      "--targets-dir", a->targets_dir,
      "Folders of your own targets, A:B (or A,B), looked up before the built-in ones;\n"
      "default: $KILN_TARGETS_DIR. Without --targets, a run takes every target in them");
  sub->add_option(
         "--config", a->config,
         "Run configuration file (see configs/run.example.json): its targets, Redis and search\n"
         "section, for what the command line does not say")
      ->check(CLI::ExistingFile);
  sub->add_option(
         "--plan", a->plan,
         "A plan from `kiln profile --out plan.json`: targets are weighted by their share of\n"
         "the profiled program's GPU time (Amdahl's law decides where evaluations go)")
      ->check(CLI::ExistingFile);
  sub->add_option(
      "--llm", a->llm,
      "Also start an LLM proposal agent with this config (docs/llm.md) beside the built-in\n"
      "proposer; its log is <out>/agent-llm.log, its statistics <out>/llm-stats.json");
  sub->add_option(
         "--shapes", a->shapes,
         "A shape sweep (JSON: target -> shapes, or a grid of dim sizes; docs/run.md\n"
         "\"Shape sweeps\"): each shape gets its own population per GPU model, timed at\n"
         "that shape, and kiln export writes a dispatch table over them. With --resume: the\n"
         "run's own sweep, or one that adds shapes (they start from their neighbours' bests)")
      ->check(CLI::ExistingFile);
  sub->add_flag("--no-transfer", a->no_transfer,
                "In a shape sweep, do not start a population from its neighbours' bests (nearest\n"
                "shapes, the same shape on other GPU models); for comparing with a cold start");
  sub->add_flag("--no-early-stop", a->no_early_stop,
                "Time every child in full; by default a child's timing stops after 5 samples\n"
                "once even the fastest is 10% slower than its parent (it could not be kept)");
  sub->add_flag("--no-profile-guidance", a->no_profile_guidance,
                "Do not let a best's bottleneck class steer the built-in proposer (new bests are\n"
                "still profiled); for comparing guided and unguided searches");
}

// Which options the command line named: a resume keeps the run's own for the others.
void note_given(CLI::App* sub, RunArgs& a) {
  for (const char* o :
       {"targets", "backend", "islands", "patience", "seed", "budget", "evaluators", "http"}) {
    const CLI::Option* given = sub->get_option_no_throw(std::string("--") + o);
    if (given && given->count() > 0) a.given.insert(o);
  }
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
  add_common_search_options(sub, a);
  sub->add_option(
         "--bind", a->bind,
         "ZeroMQ endpoint to bind: tcp://HOST:PORT with HOST an address, an interface or *\n"
         "(every interface), PORT 1-65535 or * (a free one, written to <out>/endpoint)")
      ->capture_default_str();
  sub->add_option("--backend", a->backend,
                  "Backend of the evaluators: cuda, cpu or triton (default cuda)");
  sub->add_option("--in-flight", a->in_flight, "Evaluations queued or running per target")
      ->capture_default_str();
  sub->add_option(
         "--gpu-models", a->gpu_models,
         "auto: each GPU model that connects gets its own population of every target (times\n"
         "of different GPUs never mix; a model is what the evaluator announces: its GPU's name,\n"
         "or `kiln evaluator --gpu-model`, and evaluators that name none share one population);\n"
         "any: one population fed by every evaluator; or a comma-separated list of the models\n"
         "to search on (as `nvidia-smi -L` names them)")
      ->capture_default_str();
  sub->add_option("--redis", a->redis, "Redis URL (default: a private redis-server in --out)");
  add_redis_password_option(sub, a->redis_password_file);
  add_coordinator_curve_options(sub, a->curve, false);
  sub->add_option("--out", a->out, "Output folder")->capture_default_str();
  a->http = "127.0.0.1:9464";
  sub->add_option(
         "--http", a->http,
         "Serve /status (JSON), /metrics (Prometheus), /healthz, /readyz and a live page at\n"
         "HOST:PORT (docs/observe.md); 0.0.0.0:9464 for other machines (a Prometheus, the\n"
         "Kubernetes probes); port 0 picks a free one (written to <out>/http); off: none")
      ->capture_default_str();
  sub->add_flag("--resume", a->resume,
                "Continue the run recorded in --redis (or the private Redis of --out) after the\n"
                "coordinator stopped; options not given keep the run's");
  sub->callback([&action, a, sub] {
    note_given(sub, *a);
    action = [a] { return run_search(*a); };
  });
}

void add_run_command(CLI::App& app, std::function<int()>& action) {
  auto a = std::make_shared<RunArgs>();
  CLI::App* sub = app.add_subcommand(
      "run",
      "Search for fast kernels on this machine: a private redis-server (AOF on), the coordinator,\n"
      "one evaluator per GPU (or the cpu backend, with a notice, where there is none) and the\n"
      "built-in proposer. Shows progress per target; on finish or Ctrl-C prints a summary and\n"
      "writes the best kernel of each target and every result to --out.");
  add_common_search_options(sub, a);
  sub->add_option("--backend", a->backend,
                  "cuda, cpu or triton (default: cuda when a GPU is usable)");
  sub->add_option("--gpus", a->gpus, "Comma-separated GPU ordinals (default: every visible GPU)");
  sub->add_option("--evaluators", a->evaluators,
                  "cpu backend: evaluator processes to start, at least 1 (a search with no local\n"
                  "evaluators is `kiln coordinator`; on cuda it is one per GPU of --gpus)")
      ->capture_default_str();
  sub->add_option("--redis", a->redis,
                  "Use this Redis (redis://host:port or unix:///path) instead of a private one");
  add_redis_password_option(sub, a->redis_password_file);
  a->bind = "tcp://127.0.0.1:*";
  sub->add_option(
         "--bind", a->bind,
         "Where the coordinator listens; a non-loopback address lets evaluators on other machines\n"
         "join (with CURVE: --allow their keys; this run's own evaluators get per-run keys in\n"
         "<out>/keys)")
      ->capture_default_str();
  add_coordinator_curve_options(sub, a->curve, true);
  sub->add_option("--http", a->http,
                  "Also serve /status, /metrics, /healthz, /readyz and a live page at HOST:PORT\n"
                  "(docs/observe.md), e.g. 127.0.0.1:9464; port 0 picks a free one (written to\n"
                  "<out>/http). Default: off");
  sub->add_option("--out", a->out,
                  "Output folder (also holds the private redis and the evaluator logs)")
      ->capture_default_str();
  sub->add_option("--cache-dir", a->cache_dir,
                  "Compile/reference/ceilings cache (default: ~/.cache/kiln)");
  sub->add_flag(
      "--resume", a->resume,
      "Continue the run in --out (or --redis) after a crash, a lost Redis or Ctrl-C: restarts\n"
      "its Redis from the AOF, rebuilds the search and finishes it with the budget left;\n"
      "results already in Redis are not evaluated again. Options not given keep the run's");
  sub->callback([&action, a, sub] {
    note_given(sub, *a);
    action = [a] { return run_search(*a); };
  });
}

}  // namespace kiln::cli
