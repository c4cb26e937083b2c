#include "cli/run_setup.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <set>

#include "agent/llm/llm_config.h"
#include "cli/option_checks.h"
#include "cli/plan_sweep.h"
#include "cli/resume_command.h"
#include "cli/run_support.h"
#include "coordinator/search.h"
#include "evaluator/cuda/cuda_probe.h"
#include "evaluator/profile/plan.h"
#include "evaluator/toolchain.h"
#include "shared/backends.h"
#include "shared/build_info.h"
#include "shared/endpoint.h"
#include "shared/target_path.h"
#include "shared/text.h"

namespace kiln::cli {

namespace fs = std::filesystem;

namespace {
// Bounds of what one machine starts (evaluator processes) and the coordinator queues per target.
constexpr uint32_t kMaxLocalEvaluators = 256;
constexpr uint32_t kMaxInFlight = 4096;
}  // namespace

Result<CheckedRunArgs> check_run_args(const RunArgs& args) {
  CheckedRunArgs run;
  RunArgs& a = run.args;
  a = args;
  // --config: the file's values for what the command line leaves out, and the search knobs that
  // have no option of their own (selection, migration, convergence).
  if (!a.config.empty()) {
    KILN_ASSIGN_OR_RETURN(KilnConfig cfg, load_config(a.config));
    run.search_config = cfg.search;
    auto from_file = [&](const char* option) { return a.given.insert(option).second; };
    if (!cfg.targets.empty() && from_file("targets")) {
      a.targets.clear();
      for (const auto& t : cfg.targets) a.targets += (a.targets.empty() ? "" : ",") + t;
    }
    if (a.targets_dir.empty()) a.targets_dir = cfg.targets_dir;
    if (a.redis.empty()) a.redis = cfg.redis.url;
    // Only what the file names: on a resume, a key it leaves out keeps the run's value.
    const std::set<std::string>& named = cfg.search.named;
    if (named.count("islands") && from_file("islands")) a.islands = cfg.search.islands;
    if (named.count("max_proposals_without_gain") && from_file("patience")) {
      a.patience = cfg.search.max_proposals_without_gain;
    }
    if (cfg.search.time_budget_s > 0 && from_file("budget")) {
      a.budget = std::to_string(cfg.search.time_budget_s) + "s";
    }
  }
  KILN_ASSIGN_OR_RETURN(run.budget, parse_duration(a.budget));
  KILN_RETURN_IF_ERROR(check_list(a.targets, "--targets"));
  KILN_RETURN_IF_ERROR(check_list(a.gpu_models, "--gpu-models"));
  if (a.islands == 0)
    return invalid_argument("--islands must be at least 1 (each island keeps its own elites)");
  if (a.islands > coordinator::kMaxIslands) {
    return invalid_argument("--islands: at most " + std::to_string(coordinator::kMaxIslands));
  }
  if (!a.coordinator_mode && a.evaluators == 0) {
    return invalid_argument(
        "--evaluators must be at least 1; for a search whose evaluators all run on other "
        "machines, use `kiln coordinator`");
  }
  if (!a.coordinator_mode && a.evaluators > kMaxLocalEvaluators) {
    return invalid_argument("--evaluators: at most " + std::to_string(kMaxLocalEvaluators) +
                            " processes on one machine; a bigger farm is `kiln coordinator` "
                            "with `kiln evaluator` on each machine (docs/deploy.md)");
  }
  if (a.coordinator_mode && a.in_flight == 0)
    return invalid_argument("--in-flight must be at least 1");
  if (a.in_flight > kMaxInFlight) {
    return invalid_argument("--in-flight: at most " + std::to_string(kMaxInFlight) +
                            " evaluations per target");
  }
  run.http_on = !a.http.empty() && a.http != "off";
  if (run.http_on) {
    if (Result<std::pair<std::string, uint16_t>> hp = net::parse_host_port(a.http); !hp.is_ok())
      return invalid_argument("--http: " + hp.status().message() + "; or off");
  }
  KILN_ASSIGN_OR_RETURN(run.gpus, parse_gpu_list(a.gpus));
  if (!a.backend.empty() && !is_backend(a.backend)) {
    return invalid_argument("unknown backend '" + a.backend +
                            "' for --backend (valid: cuda, cpu, triton)");
  }
  // Local evaluators on a GPU backend need the GPU here: say so now, not after a run whose
  // evaluators could never start (a coordinator's evaluators run elsewhere).
  if (!a.coordinator_mode && runs_on_gpu(a.backend)) {
    if (std::string why = backend_unavailable_here(a.backend); !why.empty()) {
      return invalid_argument(
          "--backend " + a.backend + " needs a GPU here: " + why +
          "; use --backend cpu, or `kiln coordinator` with evaluators on GPU machines");
    }
  }
  if (a.coordinator_mode) {
    Status bind = net::validate_endpoint(a.bind, net::EndpointUse::kBind);
    if (!bind.is_ok()) return invalid_argument("--bind " + bind.message());
  }
  KILN_RETURN_IF_ERROR(check_target_folders(a.targets_dir));
  // The evaluators' cache: one they cannot create would make them fail and be started again
  // until the budget is spent.
  if (!a.cache_dir.empty()) KILN_RETURN_IF_ERROR(eval::make_cache_dir(a.cache_dir));
  // The LLM agent's config and keys: a run would otherwise start it again and again.
  if (!a.llm.empty()) {
    Result<agent::llm::LlmConfig> llm = agent::llm::load_llm_config(a.llm);
    if (!llm.is_ok()) {
      return invalid_argument("--llm: " + llm.status().message() +
                              " (docs/llm.md shows the format)");
    }
    for (const auto& model : llm->models) {
      if (Result<std::string> key = agent::llm::api_key(model); !key.is_ok()) {
        return invalid_argument("--llm: " + key.status().message());
      }
    }
  }
  coordinator::SearchParams search_check = coordinator::search_params_from(run.search_config);
  search_check.islands = a.islands;
  if (Status s = coordinator::check_search_params(search_check); !s.is_ok()) return s;
  return run;
}

Result<std::vector<TargetSpec>> load_named_targets(const std::string& dirs,
                                                   const std::vector<std::string>& names) {
  std::vector<TargetSpec> out;
  for (const auto& n : names) {
    KILN_ASSIGN_OR_RETURN(std::string dir, find_target(dirs, n));
    Result<TargetSpec> t = load_target(dir);
    if (!t.is_ok())
      return invalid_argument(t.status().message() + " (list targets with `kiln targets`)");
    out.push_back(std::move(t).value());
  }
  return out;
}

std::string run_resume_hint(const RunArgs& a, const std::string& out) {
  auto path = [](const std::string& p) { return p.empty() ? p : fs::absolute(p).string(); };
  std::vector<std::string> flags;
  if (a.no_profile_guidance) flags.push_back("--no-profile-guidance");
  if (a.no_transfer) flags.push_back("--no-transfer");
  if (a.no_early_stop) flags.push_back("--no-early-stop");
  if (a.curve.insecure) flags.push_back("--insecure");
  return resume_command(
      a.coordinator_mode ? "kiln coordinator" : "kiln run",
      {{"--out", out},
       {"--redis", a.redis.empty() ? "" : redis_url_for_display(a.redis)},
       {"--redis-password-file", path(a.redis_password_file)},
       {"--redis-retry", a.redis_retry != "5m" ? a.redis_retry : ""},
       {"--curve-secret", path(a.curve.curve_secret)},
       {"--allow", path(a.curve.allow)},
       {"--targets-dir", path(a.targets_dir)},
       {"--bind", a.coordinator_mode ? a.bind : ""},
       {"--config", path(a.config)},
       {"--gpus", a.gpus},
       {"--gpu-models", a.coordinator_mode && a.gpu_models != "auto" ? a.gpu_models : ""},
       {"--in-flight", a.coordinator_mode && a.in_flight != 8 ? std::to_string(a.in_flight) : ""},
       {"--cache-dir", path(a.cache_dir)},
       {"--plan", path(a.plan)},
       {"--shapes", path(a.shapes)},
       {"--llm", path(a.llm)}},
      flags);
}

Result<RunPlacement> place_run(const RunArgs& a, std::string backend, std::vector<int> gpus,
                               bool resuming) {
  RunPlacement p;
  if (backend.empty() && a.coordinator_mode) backend = "cuda";  // the workers' backend, not ours
  if (backend.empty()) {
#ifdef KILN_HAVE_CUDA
    cuda::CudaProbe probe = cuda::probe_cuda();
    backend = !probe.gpus.empty() && probe.nvrtc_loaded ? "cuda" : "cpu";
    if (backend == "cpu") {
      std::fprintf(stderr, "kiln run: NOTICE: no usable GPU (%s); searching on the cpu backend\n",
                   !probe.driver_error.empty() ? probe.driver_error.c_str()
                   : probe.gpus.empty()        ? "no devices"
                                               : probe.nvrtc_error.c_str());
    } else if (gpus.empty()) {
      for (size_t i = 0; i < probe.gpus.size(); ++i) gpus.push_back(static_cast<int>(i));
    }
#else
    backend = "cpu";
    std::fprintf(
        stderr, "kiln run: NOTICE: built without the CUDA backend; searching on the cpu backend\n");
#endif
  }
  if (runs_on_gpu(backend) && gpus.empty()) {
#ifdef KILN_HAVE_CUDA
    if (resuming) {  // a resume names no GPUs: every visible one, as a new run would
      cuda::CudaProbe probe = cuda::probe_cuda();
      for (size_t i = 0; i < probe.gpus.size(); ++i) gpus.push_back(static_cast<int>(i));
    }
#else
    (void)resuming;
#endif
    if (gpus.empty()) gpus.push_back(0);
  }
  // Populations per GPU model: the models of the local GPUs (one population per target when they
  // are all one model), or for a coordinator those it is told or those that connect.
  p.gpu_models = {""};
  if (a.coordinator_mode) {
    if (a.gpu_models == "auto") {
      p.gpu_models.clear();
      p.discover_models = true;
    } else if (a.gpu_models != "any") {
      p.gpu_models = split_list(a.gpu_models);
      if (p.gpu_models.empty())
        return invalid_argument("--gpu-models: name models, or auto, or any");
      for (const std::string& m : p.gpu_models) {
        if (m == "auto" || m == "any") {
          return invalid_argument("--gpu-models: " + m + " stands alone, not in a list of models");
        }
        if (!printable_name_problem(m).empty()) {
          return invalid_argument("--gpu-models: '" + log_safe(m, 60) +
                                  "': a model is 1 to 100 printable ASCII characters");
        }
      }
    }
  }
#ifdef KILN_HAVE_CUDA
  if (!a.coordinator_mode && runs_on_gpu(backend)) {
    cuda::CudaProbe probe = cuda::probe_cuda();
    std::set<std::string> local;
    for (int g : gpus) {
      if (static_cast<size_t>(g) >= probe.gpus.size()) {
        return invalid_argument("--gpus: GPU " + std::to_string(g) +
                                " is not on this machine (it has " +
                                std::to_string(probe.gpus.size()) + "; `kiln version` lists them)");
      }
      local.insert(probe.gpus[g].name);
    }
    if (local.size() > 1) p.gpu_models.assign(local.begin(), local.end());
  }
#endif
  p.backend = std::move(backend);
  p.gpus = std::move(gpus);
  return p;
}

std::vector<TargetSpec> runnable_targets(std::vector<TargetSpec> targets,
                                         const std::string& backend) {
  std::vector<TargetSpec> runnable;
  for (auto& t : targets) {
    if (t.backend(backend)) {
      runnable.push_back(std::move(t));
    } else {
      std::fprintf(stderr, "kiln run: %s has no %s kernels; skipped\n", t.name.c_str(),
                   backend.c_str());
    }
  }
  return runnable;
}

namespace {

// --shapes (or a resume's recorded shapes) into `eo.shapes`, said on stderr.
Status add_shape_sweep(const CheckedRunArgs& run, const coordinator::RunRecord* rec,
                       const std::vector<TargetSpec>& runnable, const char* who,
                       coordinator::EngineOptions* eo) {
  if (!run.args.shapes.empty()) {
    std::string from_plan;
    Result<coordinator::ShapeSweep> sweep =
        load_sweep_or_plan(run.args.shapes, runnable, &from_plan);
    if (!sweep.is_ok())
      return invalid_argument("--shapes: " + sweep.status().message() +
                              " (docs/run.md \"Shape sweeps\" shows the format)");
    if (!from_plan.empty()) std::fprintf(stderr, "%s: %s\n", who, from_plan.c_str());
    eo->shapes = std::move(sweep).value();
  } else if (rec && !rec->shapes.empty()) {  // a resume sweeps the run's shapes
    Result<coordinator::ShapeSweep> sweep = coordinator::sweep_from_labels(rec->shapes, runnable);
    if (!sweep.is_ok())
      return invalid_argument("the run's recorded shapes: " + sweep.status().message());
    eo->shapes = std::move(sweep).value();
  }
  if (eo->shapes.empty()) return Status::ok();
  std::string what;
  size_t units = 0;
  for (const auto& t : runnable) {
    auto it = eo->shapes.find(t.name);
    const size_t n = it == eo->shapes.end() ? 1 : it->second.size();
    units += n;
    if (it != eo->shapes.end())
      what += (what.empty() ? "" : ", ") + t.name + " at " + std::to_string(n) + " shape(s)";
  }
  std::fprintf(stderr, "%s: shape sweep: %s; %zu population(s) per GPU model%s\n", who,
               what.c_str(), units,
               eo->transfer ? ", each starting from its neighbours' bests" : " (no transfer)");
  return Status::ok();
}

// --plan's target weights into `eo.weights`, said on stderr.
Status add_plan_weights(const std::string& plan_file, const std::vector<TargetSpec>& runnable,
                        const char* who, coordinator::EngineOptions* eo) {
  Result<profile::Plan> plan = profile::load_plan(plan_file);
  if (!plan.is_ok()) {
    return invalid_argument("--plan: " + plan.status().message() +
                            " (a plan is the file `kiln profile --out plan.json -- COMMAND` "
                            "writes; see docs/profile.md)");
  }
  eo->weights = profile::target_weights(*plan);
  std::string used;
  bool any = false;
  for (const auto& t : runnable) {
    auto w = eo->weights.find(t.name);
    any = any || w != eo->weights.end();
    used +=
        (used.empty() ? "" : ", ") + t.name + " " +
        (w == eo->weights.end() ? std::string("0%")
                                : std::to_string(static_cast<int>(100 * w->second + 0.5)) + "%");
  }
  std::fprintf(stderr, "%s: weights from %s (share of the program's GPU time): %s\n", who,
               plan_file.c_str(), used.c_str());
  if (!any) {
    std::fprintf(stderr,
                 "%s: warning: none of this run's targets appears in the plan, so they share the "
                 "evaluations equally; `kiln profile` lists the targets it mapped the program's "
                 "kernels to\n",
                 who);
  }
  return Status::ok();
}

}  // namespace

Result<coordinator::EngineOptions> engine_options(const CheckedRunArgs& run,
                                                  const EngineSettings& settings,
                                                  const std::vector<TargetSpec>& runnable,
                                                  const char* who) {
  const RunArgs& a = run.args;
  coordinator::EngineOptions eo;
  eo.backend = settings.placement.backend;
  eo.gpu_models = settings.placement.gpu_models;
  eo.discover_gpu_models = settings.placement.discover_models;
  eo.budget = settings.budget;
  eo.seed = settings.seed;
  eo.search = coordinator::search_params_from(run.search_config);
  eo.limits = coordinator::convergence_limits_from(run.search_config);
  eo.limits.time_budget_s = 0;  // the budget above governs the whole run
  eo.search.islands = settings.islands;
  eo.limits.max_proposals_without_gain = settings.patience;
  eo.in_flight_per_target =
      a.coordinator_mode
          ? a.in_flight
          : static_cast<uint32_t>(std::max<size_t>(2, settings.local_evaluators * 2));
  eo.toolchain = std::string("kiln ") + KILN_VERSION + " " + eo.backend;
  if (!settings.triton_toolchain.empty()) eo.toolchain += " (" + settings.triton_toolchain + ")";
  eo.profile_guidance = !a.no_profile_guidance;
  eo.transfer = !a.no_transfer;
  eo.early_stop = !a.no_early_stop;
  KILN_RETURN_IF_ERROR(add_shape_sweep(run, settings.resumed, runnable, who, &eo));
  if (!a.plan.empty()) KILN_RETURN_IF_ERROR(add_plan_weights(a.plan, runnable, who, &eo));
  return eo;
}

}  // namespace kiln::cli
