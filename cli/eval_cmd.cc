// `kiln eval <target>`: resolve the target and candidate, pick the backend, measure (or load) the
// device's ceilings, then compile, verify and time through a sandbox, printing progress and a
// summary (or the result as JSON).
#include "cli/eval_cmd.h"

#include "cli/sweep.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

#include "evaluator/ceilings.h"
#include "evaluator/cuda/cuda_probe.h"
#include "evaluator/evaluation.h"
#include "evaluator/result_json.h"
#include "evaluator/toolchain.h"
#include "shared/hash.h"
#include "shared/target_spec.h"

namespace kiln::cli {
namespace {

struct EvalArgs {
  std::string target;
  std::string backend;
  std::string params;
  bool use_template = false;
  std::string source_file;
  std::string kernel;
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
  uint32_t limit = 0;
  uint64_t seed = 1;
};

Result<std::map<std::string, std::string>> parse_pairs(const std::string& text, const char* what) {
  std::map<std::string, std::string> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) continue;
    size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == item.size()) {
      return invalid_argument(std::string(what) + ": '" + item + "' is not KEY=VALUE");
    }
    out[item.substr(0, eq)] = item.substr(eq + 1);
  }
  return out;
}

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

int run_eval(const EvalArgs& a) {
  auto fail = [](const std::string& msg, int code) {
    std::fprintf(stderr, "kiln eval: %s\n", msg.c_str());
    return code;
  };
  std::string dir = a.target;
  if (!std::filesystem::exists(std::filesystem::path(dir) / "target.json")) {
    dir = (a.targets_dir.empty() ? default_targets_dir() : a.targets_dir) + "/" + a.target;
  }
  if (!std::filesystem::exists(std::filesystem::path(dir) / "target.json")) {
    return fail("no target '" + a.target + "' (looked for " + dir +
                "/target.json; list targets with `ls " + default_targets_dir() + "`)", 2);
  }
  Result<TargetSpec> target = load_target(dir);
  if (!target.is_ok()) return fail(target.status().message(), 2);
  const std::string backend = pick_backend(*target, a.backend);
  const BackendSpec* b = target->backend(backend);
  if (!b) return fail("target '" + target->name + "' has no kernels for the " + backend + " backend", 2);

  // The candidate: the seed, or the template with parameter values, or a source file.
  eval::CandidateSpec c;
  Result<std::map<std::string, std::string>> params = parse_pairs(a.params, "--params");
  if (!params.is_ok()) return fail(params.status().message(), 2);
  const bool tunable = a.sweep || a.use_template || !params->empty() || (!a.source_file.empty() && b->tunable);
  if (tunable && !b->tunable) return fail("target '" + target->name + "' has no template for " + backend, 2);
  const KernelSpec& spec = tunable ? *b->tunable : b->seed;
  c.geometry = &spec;
  c.kernel_name = a.kernel.empty() ? spec.kernel_name : a.kernel;
  c.params = spec.defines;
  if (tunable) {
    for (const auto& [name, values] : spec.space) c.params[name] = std::to_string(values.front());
    for (const auto& [name, value] : *params) {
      if (!spec.space.count(name)) {
        std::string known;
        for (const auto& [k, v] : spec.space) known += (known.empty() ? "" : ", ") + k;
        return fail("--params: '" + name + "' is not a parameter of the template (parameters: " + known + ")", 2);
      }
      c.params[name] = value;
    }
  }
  if (a.source_file.empty()) {
    c.source = spec.source;
    c.label = tunable ? "template" : "seed";
  } else {
    std::ifstream in(a.source_file, std::ios::binary);
    if (!in) return fail("cannot read --source " + a.source_file, 2);
    std::stringstream ss;
    ss << in.rdbuf();
    c.source = ss.str();
    c.label = std::filesystem::path(a.source_file).filename().string();
  }
  DType dtype = b->dtypes.front();
  if (!a.dtype.empty()) {
    Result<DType> d = parse_dtype(a.dtype);
    if (!d.is_ok()) return fail(d.status().message(), 2);
    dtype = *d;
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
      s[k] = std::stoll(v);
      if (s[k] < 1) return fail("--shape: " + k + " must be positive", 2);
    }
    options.benchmark_override = s;
  }
  Result<bool> ok = eval::satisfies_constraints(spec, options.benchmark_override.value_or(target->benchmark_for(backend)), dtype, c.params);
  if (!ok.is_ok()) return fail(ok.status().message(), 2);
  if (!*ok && !a.sweep) return fail("the parameters violate the template's constraints", 2);

  Result<std::unique_ptr<eval::Toolchain>> tc = eval::Toolchain::create(backend, options.cache_dir);
  if (!tc.is_ok()) return fail(tc.status().message(), 1);
  FILE* progress_out = a.json ? stderr : stdout;
  if (backend == "cuda" && options.time) {
    eval::SandboxOptions so{options.kiln_binary, backend, options.gpu, 0};
    Result<eval::Ceilings> ceil = eval::load_or_measure_ceilings(
        so, (*tc)->compiler(), options.cache_dir,
        a.remeasure ? eval::CeilingsMode::kReplace : eval::CeilingsMode::kUseCache);
    if (!ceil.is_ok()) return fail("measuring the device's ceilings: " + ceil.status().message(), 1);
    options.bandwidth_bytes_per_s = ceil->bandwidth_bytes_per_s;
    options.matrix_flops_per_s = ceil->matrix_flops_per_s;
    std::fprintf(progress_out, "device ceilings: copy %.2f TB/s", ceil->bandwidth_bytes_per_s / 1e12);
    if (ceil->matrix_flops_per_s > 0) {
      std::fprintf(progress_out, ", f16 tensor cores %.0f TFLOP/s", ceil->matrix_flops_per_s / 1e12);
    }
    std::fprintf(progress_out, "\n");
  }
  Result<std::unique_ptr<eval::CandidateEvaluator>> ev =
      eval::CandidateEvaluator::create(*target, backend, (*tc)->compiler(), options);
  if (!ev.is_ok()) return fail(ev.status().message(), 1);

  if (a.sweep) {
    SweepArgs sw{&*target, &spec, dtype, options.benchmark_override.value_or(target->benchmark_for(backend)),
                 a.limit, a.seed, 4, a.json};
    return run_sweep(sw, **ev, (*tc)->compiler(), progress_out);
  }

  const std::string param_text = format_params(c.params);
  std::fprintf(progress_out, "kiln eval %s: backend %s, device %s (%s), kernel %s%s%s, dtype %s\n",
               target->name.c_str(), backend.c_str(), (*ev)->device_name().c_str(),
               (*ev)->arch().c_str(), c.label.c_str(), param_text.empty() ? "" : " ",
               param_text.c_str(), std::string(dtype_name(dtype)).c_str());
  proto::EvaluationResult r = (*ev)->evaluate(c, dtype, [&](const std::string& line) {
    std::fprintf(progress_out, "  %s\n", line.c_str());
    std::fflush(progress_out);
  });
  r.candidate_id = Sha256().add(target->spec_hash).add(backend).add(c.source).add(param_text)
                       .add((*tc)->compiler().toolchain_version()).hex();
  if (a.json) {
    std::printf("%s\n", eval::result_to_json(r).dump(2).c_str());
  } else {
    std::printf("result: %s", proto::outcome_name(r.outcome).c_str());
    if (r.outcome == proto::Outcome::kVerified && r.timing.median_us > 0) {
      std::printf(", median %.2f us", r.timing.median_us);
      if (r.metrics.count("bytes_per_s")) std::printf(", %.3f TB/s", r.metrics["bytes_per_s"] / 1e12);
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
      std::printf("log:\n%s\n", r.log.c_str());
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
      "(smoke, shape x dtype sweep, adversarial values, determinism, edge shapes), timing with the\n"
      "timed outputs re-checked, and the physical-floor check. Exit code 0 when verified.");
  sub->add_option("target", args->target, "Target name (a folder under the targets dir) or path")->required();
  sub->add_option("--backend", args->backend, "cuda or cpu (default: cuda when a GPU is usable)");
  sub->add_flag("--template", args->use_template, "Evaluate the tunable template (default: the seed)");
  sub->add_option("--params", args->params, "Template parameters, e.g. BLOCK=256,VEC=8 (implies --template)");
  sub->add_option("--source", args->source_file, "Evaluate this kernel source instead of the target's");
  sub->add_option("--kernel", args->kernel, "Entry point name in --source (default: the spec's)");
  sub->add_option("--dtype", args->dtype, "Dtype to time (default: the backend's first: f16 on cuda)");
  sub->add_option("--shape", args->shape, "Override the benchmark shape, e.g. M=1024,N=1024");
  sub->add_option("--targets-dir", args->targets_dir, "Folder of targets (default: built-in)");
  sub->add_option("--cache-dir", args->cache_dir, "Compile/reference/ceilings cache (default: ~/.cache/kiln)");
  sub->add_option("--gpu", args->gpu, "GPU ordinal")->capture_default_str();
  sub->add_flag("--json", args->json, "Print the result as JSON (progress goes to stderr)");
  sub->add_flag("--no-time", args->no_time, "Verify only");
  sub->add_flag("--remeasure", args->remeasure, "Measure the device's ceilings again");
  sub->add_flag("--profile", args->profile,
                "After timing, profile the kernel: CUPTI counters (DRAM and SM throughput,\n"
                "occupancy, L1/L2 hit rates), registers, shared memory, spills, theoretical\n"
                "occupancy; then the bottleneck class and the next moves it points at");
  sub->add_flag("--sweep", args->sweep,
                "Evaluate every configuration of the template that meets its constraints, with\n"
                "compiles overlapping the device work; print the fastest and the evaluation rate");
  sub->add_option("--limit", args->limit, "With --sweep: a random sample of at most this many");
  sub->add_option("--seed", args->seed, "With --sweep --limit: the sample's random seed");
  sub->callback([&action, args] { action = [args] { return run_eval(*args); }; });
}

}  // namespace kiln::cli
