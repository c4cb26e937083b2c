// `kiln eval <target>`: resolve the target and candidate, pick the backend, measure (or load) the
// device's ceilings, then compile, verify and time through a sandbox, printing progress and a
// summary (or the result as JSON).
#include "cli/eval_cmd.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

#include "cli/eval_candidate.h"
#include "cli/eval_check.h"
#include "cli/local_eval.h"
#include "cli/option_checks.h"
#include "cli/sweep.h"
#include "evaluator/ceilings.h"
#include "evaluator/cuda/cuda_probe.h"
#include "evaluator/evaluation.h"
#include "evaluator/result_json.h"
#include "evaluator/toolchain.h"
#include "shared/fatal.h"
#include "shared/hash.h"
#include "shared/target_path.h"
#include "shared/target_spec.h"
#include "shared/text.h"

namespace kiln::cli {
namespace {

struct EvalArgs {
  std::string target;
  std::string backend;
  std::string params;
  bool use_template = false;
  std::string geometry;
  std::string source_file;
  std::string kernel;
  std::string arch;
  std::string dtype;
  std::string shape;
  std::string targets_dir;
  std::string cache_dir;
  int gpu = 0;
  bool json = false;
  bool no_time = false;
  bool profile = false;
  bool remeasure = false;
  bool sweep = false;
  bool check = false;
  uint32_t limit = 0;
  uint64_t seed = 1;
};

std::string pick_backend(const TargetSpec& t, std::string requested) {
  if (!requested.empty()) return requested;
#ifdef KILN_HAVE_CUDA
  cuda::CudaProbe p = cuda::probe_cuda();
  if (!p.gpus.empty() && p.nvrtc_loaded && t.backend("cuda")) return "cuda";
  std::fprintf(stderr, "kiln eval: NOTICE: no usable GPU (%s); using the cpu backend\n",
               !p.driver_error.empty() ? p.driver_error.c_str()
               : p.gpus.empty()        ? "no devices"
               : !p.nvrtc_loaded       ? p.nvrtc_error.c_str()
                                       : "target has no cuda kernels");
#else
  std::fprintf(stderr, "kiln eval: NOTICE: built without the CUDA backend; using the cpu backend\n");
#endif
  return "cpu";
}

// The backend for --check when none is named: cuda wherever NVRTC loads (no GPU needed), else cpu.
std::string pick_check_backend(const TargetSpec& t, const std::string& requested) {
  if (!requested.empty()) return requested;
#ifdef KILN_HAVE_CUDA
  cuda::CudaProbe p = cuda::probe_cuda();
  if (p.nvrtc_loaded && t.backend("cuda")) return "cuda";
  std::fprintf(stderr, "kiln eval --check: NOTICE: %s; checking the cpu kernels\n",
               !p.nvrtc_loaded ? ("no CUDA toolkit (NVRTC: " + p.nvrtc_error + ")").c_str()
                               : "the target has no cuda kernels");
#else
  std::fprintf(stderr,
               "kiln eval --check: NOTICE: built without the CUDA backend; checking the cpu "
               "kernels\n");
#endif
  return "cpu";
}

// The architecture --check compiles cuda and triton for: --arch, else the GPU's, else sm_90a.
std::string check_arch(const EvalArgs& a, const std::string& backend) {
  if (backend == "cpu") return "cpu";
  if (!a.arch.empty()) return a.arch;
#ifdef KILN_HAVE_CUDA
  cuda::CudaProbe p = cuda::probe_cuda();
  for (const auto& g : p.gpus) {
    if (g.ordinal == a.gpu) return g.arch();
  }
#endif
  return "sm_90a";
}

int run_eval(const EvalArgs& a) {
  auto fail = [](const std::string& msg, int code) {
    report_fatal("kiln eval: " + msg);
    return code;
  };
  Result<std::string> dir = find_target(a.targets_dir, a.target);
  if (!dir.is_ok()) return fail(dir.status().message(), 2);
  Result<TargetSpec> target = load_target(*dir);
  if (!target.is_ok()) return fail(target.status().message(), 2);
  if (a.check && (a.sweep || a.profile)) {
    return fail("--check runs nothing: drop --sweep and --profile", 2);
  }
  const std::string backend =
      a.check ? pick_check_backend(*target, a.backend) : pick_backend(*target, a.backend);
  const BackendSpec* b = target->backend(backend);
  if (!b) return fail("target '" + target->name + "' has no kernels for the " + backend + " backend", 2);

  Result<std::map<std::string, std::string>> params = parse_pairs(a.params, "--params");
  if (!params.is_ok()) return fail(params.status().message(), 2);
  DType dtype = b->dtypes.front();
  if (!a.dtype.empty()) {
    Result<DType> d = parse_dtype(a.dtype);
    if (!d.is_ok()) return fail(d.status().message(), 2);
    dtype = *d;
    if (std::find(b->dtypes.begin(), b->dtypes.end(), dtype) == b->dtypes.end()) {
      std::string have;
      for (DType x : b->dtypes) have += (have.empty() ? "" : ", ") + std::string(dtype_name(x));
      return fail("--dtype " + a.dtype + ": the " + backend + " kernels of " + target->name +
                      " take " + have,
                  2);
    }
  }

  eval::EvaluatorOptions options;
  options.kiln_binary = std::filesystem::read_symlink("/proc/self/exe").string();
  options.cache_dir = a.cache_dir.empty() ? eval::default_cache_dir() : a.cache_dir;
  options.gpu = a.gpu;
  options.time = !a.no_time;
  if (a.profile && a.no_time) return fail("--profile needs the timing (drop --no-time)", 2);
  options.profile = a.profile;
  if (!a.shape.empty()) {
    Result<std::map<std::string, std::string>> pairs = parse_pairs(a.shape, "--shape");
    if (!pairs.is_ok()) return fail(pairs.status().message(), 2);
    Shape s = target->benchmark;
    for (const auto& [k, v] : *pairs) {
      if (!s.count(k)) return fail("--shape: '" + k + "' is not a dim of " + target->name, 2);
      const std::optional<int64_t> n = parse_int64(v);
      if (!n || *n < 1 || *n > kMaxDimSize) {
        return fail("--shape: " + k + "=" + v.substr(0, 40) +
                        ": a size is a whole number from 1 to " + std::to_string(kMaxDimSize),
                    2);
      }
      s[k] = *n;
    }
    if (Status fits = check_shape(*target, s); !fits.is_ok())
      return fail("--shape: " + fits.message(), 2);
    options.benchmark_override = s;
  }
  const Shape shape = options.benchmark_override.value_or(target->benchmark_for(backend));

  // The candidate: the seed, or the template with parameter values, or a source file, launched
  // with the seed's or the template's geometry.
  CandidateArgs ca{a.source_file, a.kernel, a.geometry, a.use_template, a.sweep, *params};
  Result<CandidateChoice> choice = choose_candidate(*b, ca, shape, dtype);
  if (!choice.is_ok()) {
    return fail("target '" + target->name + "' (" + backend + "): " + choice.status().message(), 2);
  }
  const eval::CandidateSpec& c = choice->candidate;

  Result<std::unique_ptr<eval::Toolchain>> tc = eval::Toolchain::create(backend, options.cache_dir);
  if (!tc.is_ok()) {
    if (backend == "cuda") {
      const std::string why = "no CUDA toolkit here (" + tc.status().message() +
                              "): the cuda backend compiles with NVRTC; install the toolkit or set "
                              "CUDA_HOME, or use --backend cpu";
      return fail(why, 1);
    }
    return fail(tc.status().message(), 1);
  }
  if (a.check) {
    CheckArgs ck{&*target, b, backend, check_arch(a, backend), &*choice, shape, dtype, a.json};
    return run_eval_check(ck, (*tc)->compiler());
  }
  // Running needs the device (compiling does not): say so before a sandbox fails on it.
  if (std::string why = backend_unavailable_here(backend); !why.empty()) {
    return fail("the " + backend + " backend cannot run here: " + why +
                    (backend == "cpu" ? "" : " (kiln eval --check compiles without a GPU)"),
                1);
  }
  FILE* progress_out = a.json ? stderr : stdout;
  if (options.time) {
    eval::SandboxOptions so{options.kiln_binary, backend, options.gpu, 0};
    Result<eval::Ceilings> ceil = eval::load_or_measure_ceilings(
        so, (*tc)->compiler(), options.cache_dir,
        a.remeasure ? eval::CeilingsMode::kReplace : eval::CeilingsMode::kUseCache);
    if (!ceil.is_ok()) return fail("measuring the device's ceilings: " + ceil.status().message(), 1);
    options.bandwidth_bytes_per_s = eval::floor_bandwidth(*ceil);
    options.matrix_flops_per_s = ceil->matrix_flops_per_s;
    options.attainable_flops_per_s = ceil->attainable_flops_per_s;
    std::fprintf(progress_out, "%s\n", eval::ceilings_line(*ceil).c_str());
  }
  Result<std::unique_ptr<eval::CandidateEvaluator>> ev =
      eval::CandidateEvaluator::create(*target, backend, (*tc)->compiler(), options);
  if (!ev.is_ok()) {  // a shape this machine cannot hold is bad usage; a sandbox that fails is not
    return fail(ev.status().message(), ev.status().code() == StatusCode::kInvalidArgument ? 2 : 1);
  }

  if (a.sweep) {
    SweepArgs sw;
    sw.target = &*target;
    sw.spec = choice->spec;
    sw.dtype = dtype;
    sw.shape = shape;
    sw.limit = a.limit;
    sw.seed = a.seed;
    sw.json = a.json;
    if (!a.source_file.empty()) {
      sw.source = c.source;
      sw.kernel_name = c.kernel_name;
      sw.label = c.label;
    }
    return run_sweep(sw, **ev, (*tc)->compiler(), progress_out);
  }

  const std::string param_text = format_params(c.params);
  std::fprintf(
      progress_out, "kiln eval %s: backend %s, device %s (%s), kernel %s%s%s%s, dtype %s\n",
      target->name.c_str(), backend.c_str(), (*ev)->device_name().c_str(), (*ev)->arch().c_str(),
      c.label.c_str(),
      a.source_file.empty() ? "" : (" with the " + choice->geometry + "'s geometry").c_str(),
      param_text.empty() ? "" : " ", param_text.c_str(), std::string(dtype_name(dtype)).c_str());
  if (!choice->params_note.empty() && params->size() < choice->spec->space.size()) {
    std::fprintf(progress_out, "  parameters: %s\n", choice->params_note.c_str());
  }
  proto::EvaluationResult r = (*ev)->evaluate(c, dtype, [&](const std::string& line) {
    std::fprintf(progress_out, "  %s\n", terminal_safe(line).c_str());
    std::fflush(progress_out);
  });
  r.candidate_id = Sha256().add(target->spec_hash).add(backend).add(c.source).add(param_text)
                       .add((*tc)->compiler().toolchain_version()).hex();
  if (a.json) {
    nlohmann::json j = eval::result_to_json(r);
    // What was evaluated and how it was launched, beside the verdict.
    j["candidate"] = {{"label", c.label},
                      {"kernel", c.kernel_name},
                      {"backend", backend},
                      {"dtype", dtype_name(dtype)}};
    j["params"] = c.params;
    j["geometry"] = geometry_json(*choice, shape, dtype);
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    std::printf("result: %s", proto::outcome_name(r.outcome).c_str());
    if (r.outcome == proto::Outcome::kVerified && r.timing.median_us > 0) {
      std::printf(", median %.2f us", r.timing.median_us);
      if (r.metrics.count("bytes_per_s")) {
        const double bps = r.metrics["bytes_per_s"];
        if (bps >= 1e12) {
          std::printf(", %.3f TB/s", bps / 1e12);
        } else {
          std::printf(", %.2f GB/s", bps / 1e9);
        }
      }
      if (r.metrics.count("fraction_of_floor")) {
        std::printf(", %.1f%% of the floor (%.2f us)", 100 * r.metrics["fraction_of_floor"], r.metrics["floor_us"]);
      }
    }
    std::printf(" [%.2f s]\n", r.wall_ms / 1000);
    if (a.profile && r.outcome == proto::Outcome::kVerified) {
      // The progress lines above already showed the profile; the summary repeats the class.
      if (!r.bottleneck.empty()) {
        std::printf("bottleneck: %s\n", r.bottleneck.c_str());
      } else if (!r.profile_note.empty()) {
        std::printf("profile: %s\n", r.profile_note.c_str());
      }
    }
    if (r.outcome != proto::Outcome::kVerified && !r.log.empty()) {
      std::printf("log:\n%s\n", terminal_safe(r.log).c_str());
    }
  }
  return r.outcome == proto::Outcome::kVerified ? 0 : 1;
}

}  // namespace

void add_eval_command(CLI::App& app, std::function<int()>& action) {
  auto args = std::make_shared<EvalArgs>();
  CLI::App* sub = app.add_subcommand(
      "eval",
      "Evaluate one candidate without a cluster: static scan, compile, five verification stages\n"
      "(smoke, shape x dtype sweep, adversarial values, determinism, edge shapes), timing with\n"
      "the timed outputs re-checked, and the physical-floor check (on cpu a sanity bound from\n"
      "one core's measured copy rate). Exit code 0 when verified (with --check: when the scan is\n"
      "clean and every dtype compiled), 1 otherwise, 2 for bad usage.");
  sub->add_option("target", args->target, "Target name (a folder under the targets dir) or path")->required();
  sub->add_option("--backend", args->backend,
                  "cuda, cpu or triton (default: cuda when a GPU is usable)")
      ->check(CLI::IsMember({"cuda", "cpu", "triton"}));
  sub->add_flag("--template", args->use_template,
                "Evaluate the tunable template (default: the seed); with --source, launch the\n"
                "source with the template's geometry (as --geometry template)");
  sub->add_option(
      "--params", args->params,
      "Template parameters, e.g. BLOCK=256,VEC=8 (implies --template); the others take\n"
      "the first configuration that meets the constraints with these values");
  sub->add_option("--source", args->source_file,
                  "Evaluate this kernel source instead of the target's, launched with the seed's\n"
                  "geometry unless --geometry template, --template or --params says otherwise");
  CLI::Option* geometry = sub->add_option(
      "--geometry", args->geometry,
      "Whose launch geometry (grid, block, shared memory) and -D values the kernel gets:\n"
      "seed, or template (its parameters from --params, the rest from the first\n"
      "configuration that meets the constraints). Default: template with --template,\n"
      "--params or --sweep, else seed");
  geometry->check(CLI::IsMember({"seed", "template"}));
  sub->add_option("--kernel", args->kernel, "Entry point name in --source (default: the spec's)");
  sub->add_option("--dtype", args->dtype, "Dtype to time (default: the backend's first: f16 on cuda)");
  sub->add_option("--shape", args->shape, "Override the benchmark shape, e.g. M=1024,N=1024");
  sub->add_option("--targets-dir", args->targets_dir,
                  "Folders of your own targets, A:B (or A,B), looked up before the built-in ones;\n"
                  "default: $KILN_TARGETS_DIR");
  sub->add_option("--cache-dir", args->cache_dir, "Compile/reference/ceilings cache (default: ~/.cache/kiln)");
  sub->add_option("--gpu", args->gpu, "GPU ordinal")->capture_default_str();
  sub->add_flag("--json", args->json,
                "Print the result as JSON (progress goes to stderr), with the parameters and the\n"
                "launch geometry at the timed shape");
  sub->add_flag("--no-time", args->no_time, "Verify only");
  sub->add_flag("--check", args->check,
                "Only scan and compile the candidate in every dtype and evaluate its geometry;\n"
                "print the findings and the compile logs. Runs nothing: no sandbox, no GPU (cuda\n"
                "compiles through NVRTC, the default backend here wherever it loads)");
  sub->add_option("--arch", args->arch,
                  "With --check: CUDA architecture to compile for (default: the GPU's, else\n"
                  "sm_90a)")
      ->check(gpu_arch());
  sub->add_flag("--remeasure", args->remeasure,
                "Measure the device's ceilings again (on cpu: one core's copy rate, which bounds\n"
                "the floor check)");
  sub->add_flag("--profile", args->profile,
                "After timing, profile the kernel: CUPTI counters (DRAM and SM throughput,\n"
                "occupancy, L1/L2 hit rates), registers, shared memory, spills, theoretical\n"
                "occupancy; then the bottleneck class and the next moves it points at");
  CLI::Option* sweep = sub->add_flag(
      "--sweep", args->sweep,
      "Evaluate every configuration of the template that meets its constraints, with\n"
      "compiles overlapping the device work; print the fastest and the evaluation rate\n"
      "(with --source: that source at every configuration)");
  CLI::Option* limit =
      sub->add_option("--limit", args->limit, "With --sweep: a random sample of at most this many")
          ->needs(sweep);
  sub->add_option("--seed", args->seed, "With --sweep --limit: the sample's random seed")
      ->needs(limit);
  sub->callback([&action, args] { action = [args] { return run_eval(*args); }; });
}

}  // namespace kiln::cli
