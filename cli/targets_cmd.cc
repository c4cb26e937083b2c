// `kiln targets`: lists the targets of a folder (shape, dtypes, floor, template size) and, with
// --check, checks them without a GPU: the spec loads, the reference compiles and runs, every launch
// geometry evaluates at every verification shape, and the seed and every template configuration
// pass the static scan and compile (NVRTC for cuda, the host compiler for cpu) in every dtype.
// This is what a user runs after writing a target, before spending GPU time on it.
#include "cli/targets_cmd.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <set>
#include <thread>

#include "cli/launch_check.h"
#include "cli/option_checks.h"
#include "cli/sweep.h"
#include "evaluator/evaluation.h"
#include "evaluator/reference.h"
#include "evaluator/reference_check.h"
#include "evaluator/source_scan.h"
#include "evaluator/toolchain.h"
#include "shared/expr.h"
#include "shared/fatal.h"
#include "shared/target_path.h"
#include "shared/target_spec.h"
#include "shared/text.h"

namespace kiln::cli {
namespace {

// How long --check lets one call of a reference at a verification shape run.
constexpr std::chrono::milliseconds kReferenceCheckDeadline{60'000};

struct TargetsArgs {
  std::vector<std::string> names;
  std::string targets_dir;
  std::string cache_dir;
  std::string backend = "all";
  std::string arch = "sm_90a";
  bool check = false;
  uint32_t limit = 0;
  unsigned jobs = std::max(1u, std::thread::hardware_concurrency());
};

std::string shape_list(const std::vector<Shape>& shapes) {
  std::string s;
  for (const auto& sh : shapes) s += (s.empty() ? "" : " ") + shape_string(sh);
  return s;
}

void list_target(const TargetSpec& t) {
  const DType d = t.dtypes.front();
  ExprVars vars = expr_vars(t.benchmark, d, {});
  Result<double> bytes = eval_expr(t.bytes_expr, vars);
  Result<double> flops = eval_expr(t.flops_expr, vars);
  std::string dtypes, backends;
  for (DType x : t.dtypes) dtypes += (dtypes.empty() ? "" : ",") + std::string(dtype_name(x));
  for (const auto& [name, b] : t.backends) {
    size_t configs = 0;
    if (b.tunable) {
      configs = template_configs(*b.tunable, t.benchmark_for(name), b.dtypes.front(), 0, 1).size();
    }
    backends += (backends.empty() ? "" : ", ") + name +
                (b.tunable ? " (seed + " + std::to_string(configs) + " configs)" : " (seed)");
  }
  std::printf("%-18s %-34s %-13s %9.1f MB %9.2f GFLOP  %s\n", t.name.c_str(),
              shape_string(t.benchmark).c_str(), dtypes.c_str(),
              bytes.is_ok() ? *bytes / 1e6 : -1.0, flops.is_ok() ? *flops / 1e9 : -1.0,
              backends.c_str());
}

struct CompileJob {
  std::string label;  // "cuda template BLOCK=256,VEC=8 f16"
  eval::CompileRequest request;
};

// Compiles `jobs` on `threads` threads; prints each failure with its log. Returns the failures.
int compile_all(const std::vector<CompileJob>& jobs, eval::Compiler& compiler, unsigned threads) {
  std::atomic<size_t> next{0};
  std::vector<eval::CompileOutput> outs(jobs.size());
  std::vector<std::thread> pool;
  for (unsigned i = 0; i < std::max(1u, threads); ++i) {
    pool.emplace_back([&] {
      for (size_t k = next++; k < jobs.size(); k = next++) outs[k] = compiler.compile(jobs[k].request);
    });
  }
  for (auto& th : pool) th.join();
  int failed = 0;
  for (size_t k = 0; k < jobs.size(); ++k) {
    if (outs[k].ok) continue;
    std::printf("  FAIL %s: compile error:\n%s\n", jobs[k].label.c_str(), outs[k].log.c_str());
    ++failed;
  }
  return failed;
}

// Checks one kernel (seed or one template configuration) of one backend: geometry and tensor maps
// at every shape and the static scan here (failures printed), compiles queued on `jobs`. Returns
// the number of problems found so far.
int check_kernel(const TargetSpec& t, const std::string& backend, const BackendSpec& b,
                 const KernelSpec& spec, const std::map<std::string, std::string>& params,
                 const std::string& label, const std::string& arch, std::set<std::string>* scanned,
                 std::vector<CompileJob>* jobs) {
  int problems = 0;
  for (const LaunchProblem& p : launch_problems(t, backend, b, spec, params)) {
    std::printf("  FAIL %s %s %s: launch geometry at %s: %s\n", backend.c_str(), label.c_str(),
                std::string(dtype_name(p.dtype)).c_str(), shape_string(p.shape).c_str(),
                p.why.c_str());
    ++problems;
  }
  if (scanned->insert(spec.source_file).second) {
    for (const eval::ScanFinding& f : eval::scan_source(spec.source, backend)) {
      std::printf("  FAIL %s %s: static scan: %s (line %d)\n", backend.c_str(),
                  spec.source_file.c_str(), f.rule.c_str(), f.line);
      ++problems;
    }
  }
  const eval::CandidateSpec c = eval::candidate_of(spec, label, params);
  for (DType d : b.dtypes) {
    Result<eval::CompileRequest> req = eval::build_compile_request(t, backend, arch, c, d);
    if (!req.is_ok()) {
      std::printf("  FAIL %s %s %s: %s\n", backend.c_str(), label.c_str(),
                  std::string(dtype_name(d)).c_str(), req.status().message().c_str());
      ++problems;
      continue;
    }
    jobs->push_back({backend + " " + label + " " + std::string(dtype_name(d)), std::move(req).value()});
  }
  return problems;
}

// A reference that exports kiln_reference_terms where the evaluator never calls it: the target
// gives no `terms` tolerance, or its outputs have no rows (no reference_rows and no first dim
// shared by every output), where the evaluator falls back to the reference on squared inputs.
// A warning, not a problem: the target still verifies, only not as its author meant.
void warn_unused_terms(const TargetSpec& t) {
  if (!uses_terms(t)) {
    std::printf(
        "  WARN reference: exports kiln_reference_terms, but no tolerance gives `terms`, "
        "so it is never called (docs/targets.md, \"Choosing tolerances\")\n");
  } else if (reference_row_dims(t).empty()) {
    std::printf(
        "  WARN reference: exports kiln_reference_terms, but the outputs have no rows "
        "(set \"reference_rows\", or give every output the same first dim): the terms "
        "come from the reference on squared inputs instead\n");
  }
}

int run_targets(const TargetsArgs& a) {
  std::vector<TargetSpec> targets;
  if (a.names.empty()) {
    Result<std::vector<TargetSpec>> all = load_target_path(a.targets_dir, /*own_only=*/false);
    if (!all.is_ok()) {
      report_fatal("kiln targets: " + all.status().message());
      return 2;
    }
    targets = std::move(all).value();
  } else {
    std::set<std::string> named;
    for (const auto& name : a.names) {
      if (!named.insert(name).second) continue;  // named twice: listed and checked once
      Result<std::string> dir = find_target(a.targets_dir, name);
      if (!dir.is_ok()) {
        report_fatal("kiln targets: " + dir.status().message());
        return 2;
      }
      Result<TargetSpec> t = load_target(*dir);
      if (!t.is_ok()) {
        report_fatal("kiln targets: " + t.status().message());
        return 2;
      }
      targets.push_back(std::move(t).value());
    }
  }
  if (!a.check) {
    std::printf("%-18s %-34s %-13s %12s %15s  %s\n", "target", "benchmark shape", "dtypes", "bytes",
                "flops", "backends");
    for (const auto& t : targets) list_target(t);
    std::string where;
    for (const auto& f : target_folders(a.targets_dir)) where += (where.empty() ? "" : ", ") + f;
    std::printf(
        "\n%zu targets in %s. `kiln targets --check` compiles them; `kiln eval NAME` "
        "evaluates one.\n",
        targets.size(), where.c_str());
    return 0;
  }

  const std::string cache = a.cache_dir.empty() ? eval::default_cache_dir() : a.cache_dir;
  std::map<std::string, std::unique_ptr<eval::Toolchain>> toolchains;
  int problems = 0, kernels = 0;
  for (const auto& t : targets) {
    std::printf("%s:\n", t.name.c_str());
    int before = problems;
    if (Result<std::unique_ptr<eval::Reference>> ref = eval::Reference::build(t, cache); !ref.is_ok()) {
      std::printf("  FAIL reference: %s\n", ref.status().message().c_str());
      ++problems;
    } else {
      // Run once at every verification shape: a reference that crashes or never returns is
      // found now, not by the first evaluation of a search.
      if (Status st =
              eval::check_reference(**ref, t, t.verification_shapes(), kReferenceCheckDeadline);
          !st.is_ok()) {
        std::printf("  FAIL reference: %s\n", log_safe(st.message(), 1000).c_str());
        ++problems;
      }
      if ((*ref)->has_terms()) warn_unused_terms(t);
    }
    for (const auto& [backend, b] : t.backends) {
      if (a.backend != "all" && a.backend != backend) continue;
      if (!toolchains.count(backend)) {
        Result<std::unique_ptr<eval::Toolchain>> tc = eval::Toolchain::create(backend, cache);
        if (!tc.is_ok()) {
          std::printf("  SKIP %s: no compiler (%s)\n", backend.c_str(), tc.status().message().c_str());
          toolchains[backend] = nullptr;
          continue;
        }
        toolchains[backend] = std::move(tc).value();
      }
      if (!toolchains[backend]) continue;
      eval::Compiler& compiler = toolchains[backend]->compiler();
      const std::string arch = backend == "cpu" ? "cpu" : a.arch;  // cuda and triton: a GPU's
      std::set<std::string> scanned;
      std::vector<CompileJob> jobs;
      problems += check_kernel(t, backend, b, b.seed, b.seed.defines, "seed", arch, &scanned, &jobs);
      ++kernels;
      std::vector<std::map<std::string, std::string>> configs;
      if (b.tunable) configs = template_configs(*b.tunable, t.benchmark_for(backend), b.dtypes.front(), a.limit, 1);
      if (b.tunable && configs.empty()) {
        std::printf("  FAIL %s template: no configuration satisfies the constraints at %s\n",
                    backend.c_str(), shape_string(t.benchmark_for(backend)).c_str());
        ++problems;
      }
      for (const auto& params : configs) {
        problems += check_kernel(t, backend, b, *b.tunable, params, "template " + format_params(params),
                                 arch, &scanned, &jobs);
        ++kernels;
      }
      problems += compile_all(jobs, compiler, a.jobs);
      std::printf("  %s: seed and %zu template configurations x %zu dtypes compiled\n",
                  backend.c_str(), configs.size(), b.dtypes.size());
    }
    if (problems == before) std::printf("  ok (shapes: smoke %s; sweep %s; edge %s)\n",
                                        shape_list(t.smoke).c_str(), shape_list(t.sweep).c_str(),
                                        shape_list(t.edge).c_str());
  }
  std::printf("\n%d kernel(s) of %zu target(s) checked: %d problem(s)\n", kernels, targets.size(), problems);
  return problems == 0 ? 0 : 1;
}

}  // namespace

void add_targets_command(CLI::App& app, std::function<int()>& action) {
  auto args = std::make_shared<TargetsArgs>();
  CLI::App* sub = app.add_subcommand(
      "targets",
      "List the targets (benchmark shape, dtypes, bytes and flops of the floor, template size).\n"
      "With --check, check them without a GPU: the spec, the reference, every launch geometry at\n"
      "every verification shape, the static scan, and compiles of the seed and of every template\n"
      "configuration in every dtype (NVRTC for cuda, the host compiler for cpu). Exit code 0 when\n"
      "everything passed. See docs/targets.md for writing a target.");
  sub->add_option("names", args->names, "Targets to show or check (default: all in the folder)");
  sub->add_option("--targets-dir", args->targets_dir,
                  "Folders of your own targets, A:B (or A,B), looked up before the built-in ones;\n"
                  "default: $KILN_TARGETS_DIR. Lists them all, yours first where names collide");
  sub->add_flag("--check", args->check, "Compile and check instead of listing");
  sub->add_option("--backend", args->backend, "With --check: cuda, cpu, triton or all")
      ->check(CLI::IsMember({"cuda", "cpu", "triton", "all"}))
      ->capture_default_str();
  sub->add_option("--arch", args->arch, "With --check: CUDA architecture to compile for")
      ->capture_default_str()
      ->check(gpu_arch());
  sub->add_option("--limit", args->limit, "With --check: at most this many template configurations (a sample)");
  sub->add_option("--jobs,-j", args->jobs, "With --check: compiles in parallel (1 to 256)")
      ->check(CLI::Range(1u, 256u))
      ->capture_default_str();
  sub->add_option("--cache-dir", args->cache_dir, "Compile/reference cache (default: ~/.cache/kiln)");
  sub->callback([&action, args] { action = [args] { return run_targets(*args); }; });
}

}  // namespace kiln::cli
