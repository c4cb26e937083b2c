// `kiln export`: see export_cmd.h. Finds the candidate, writes the format's files, re-verifies
// the kernel here (where this machine has the backend's device) and writes the record.
#include "cli/export_cmd.h"

#include <cstdio>
#include <filesystem>
#include <set>

#include "cli/eval_candidate.h"
#include "cli/export_dispatch.h"
#include "cli/export_here.h"
#include "cli/local_eval.h"
#include "cli/redis_password.h"
#include "evaluator/cuda/cuda_probe.h"
#include "evaluator/result_json.h"
#include "export/python_export.h"
#include "export/record.h"
#include "shared/fatal.h"
#include "shared/redis_url.h"
#include "shared/target_path.h"

namespace kiln::cli {
namespace fs = std::filesystem;
namespace {

struct ExportArgs {
  std::string target;
  std::string out;
  std::string redis;
  std::string redis_password_file;
  std::string gpu_model;
  std::string candidate;
  bool seed = false;
  bool use_template = false;
  std::string params;
  std::string backend;
  std::string dtype;
  std::string format;
  std::string to;
  bool no_verify = false;
  std::string targets_dir;
  int gpu = 0;
};

std::string local_gpu_model(int gpu) {
  const cuda::CudaProbe p = cuda::probe_cuda();
  for (const auto& g : p.gpus)
    if (g.ordinal == gpu) return g.name;
  return "";
}

// The target's own seed or template configuration, without a run.
Result<exporter::ExportCandidate> from_target(const ExportArgs& a) {
  KILN_ASSIGN_OR_RETURN(std::string dir, find_target(a.targets_dir, a.target));
  exporter::ExportCandidate c;
  KILN_ASSIGN_OR_RETURN(c.target, load_target(dir));
  c.backend = a.backend.empty() ? (c.target.backend("cuda") ? "cuda" : "cpu") : a.backend;
  const BackendSpec* b = c.target.backend(c.backend);
  if (!b)
    return failed_precondition("target '" + a.target + "' has no kernels for the " + c.backend +
                               " backend");
  c.dtype = b->dtypes.front();
  if (!a.dtype.empty()) {
    KILN_ASSIGN_OR_RETURN(c.dtype, parse_dtype(a.dtype));
  }
  KILN_ASSIGN_OR_RETURN(auto params, parse_pairs(a.params, "--params"));
  CandidateArgs ca;
  ca.use_template = a.use_template || !params.empty();
  ca.params = params;
  KILN_ASSIGN_OR_RETURN(CandidateChoice choice,
                        choose_candidate(*b, ca, c.target.benchmark_for(c.backend), c.dtype));
  c.is_template = choice.geometry == "template";
  c.source = choice.candidate.source;
  c.kernel_name = choice.candidate.kernel_name;
  c.params = choice.candidate.params;
  c.arch = c.backend == "cuda" ? "sm_90a" : "cpu";
  if (c.backend == "cuda") {
    for (const auto& g : cuda::probe_cuda().gpus)
      if (g.ordinal == a.gpu) c.arch = g.arch();
  }
  c.origin = "target " + c.target.name + " (" + choice.geometry + ")";
  return c;
}

Result<exporter::ExportCandidate> find_candidate(const ExportArgs& a) {
  const int sources = (a.out.empty() ? 0 : 1) + (a.redis.empty() ? 0 : 1) +
                      ((a.seed || a.use_template || !a.params.empty()) ? 1 : 0);
  if (sources != 1) {
    return invalid_argument(
        "say where the kernel comes from: a run's --out folder, a run's --redis, or the "
        "target's own --seed / --template [--params]");
  }
  exporter::RunSelection sel{a.target, a.gpu_model, a.candidate, local_gpu_model(a.gpu)};
  if (!a.out.empty()) {
    // A run that is still going writes best/ only at its end: its Redis has the standing now.
    const fs::path sock = fs::path(a.out) / "redis" / "redis.sock";
    if (!fs::exists(fs::path(a.out) / "best") && fs::exists(sock)) {
      redis::RedisOptions o;
      o.url = "unix://" + fs::absolute(sock).string();
      o.connect_timeout_ms = 1000;
      o.max_reconnect_attempts = 1;
      KILN_ASSIGN_OR_RETURN(redis::RedisClient client, redis::RedisClient::connect(o));
      return exporter::from_redis(client, sel, a.targets_dir);
    }
    return exporter::from_run_folder(a.out, sel, a.targets_dir);
  }
  if (!a.redis.empty()) {
    KILN_ASSIGN_OR_RETURN(redis::RedisOptions o, redis::parse_redis_url(a.redis));
    if (!a.redis_password_file.empty())
      KILN_RETURN_IF_ERROR(apply_redis_password_file(a.redis_password_file, o));
    o.connect_timeout_ms = 2000;
    o.max_reconnect_attempts = 1;
    KILN_ASSIGN_OR_RETURN(redis::RedisClient client, redis::RedisClient::connect(o));
    return exporter::from_redis(client, sel, a.targets_dir);
  }
  return from_target(a);
}

Result<std::vector<exporter::ExportFile>> render(const exporter::ExportCandidate& c,
                                                 const std::string& format) {
  const std::string note = exporter::header_note(c, format);
  if (c.backend == "triton") {
    // Every format writes C++ or CUDA launchers around a C++ source; a Triton kernel is Python.
    return invalid_argument(
        "'" + c.target.name +
        "' was searched on the triton backend, and kiln export does not "
        "write Triton kernels yet (its formats build C++ and CUDA sources). The verified kernel "
        "is the 'source' of its best/<target>.json in the run's output folder, launched with that "
        "file's 'params' (constexprs, num_warps, num_stages), 'grid' and 'block' (block = 32 x "
        "num_warps threads)");
  }
  if (format == "cuda" || format == "cpp") {
    if ((format == "cuda") != (c.backend == "cuda")) {
      return invalid_argument("--format " + format + " is for kernels of the " +
                              (format == "cuda" ? "cuda" : "cpu") + " backend; this one is " +
                              c.backend + ": use --format " +
                              (c.backend == "cuda" ? "cuda" : "cpp"));
    }
    return exporter::source_export(c, note);
  }
  if (format == "torch") return exporter::torch_export(c, note);
  if (format == "gpumode") return exporter::gpumode_export(c, note);
  if (format == "kernelbench") return exporter::kernelbench_export(c, note);
  return invalid_argument("unknown --format " + format);
}

int run_export(const ExportArgs& a) {
  auto fail = [](const std::string& msg, int code) {
    report_fatal("kiln export: " + msg);
    return code;
  };
  // A run that swept shapes of the target: its bests make a dispatch table (with --gpu-model,
  // of that model's populations only).
  if (!a.out.empty()) {
    Result<std::vector<exporter::ExportCandidate>> swept =
        exporter::sweep_bests_from_run_folder(a.out, a.target, a.targets_dir);
    if (!swept.is_ok()) return fail(swept.status().message(), 2);
    if (!swept->empty()) {
      if (!a.candidate.empty()) {
        return fail("'" + a.target + "' was searched over a shape sweep in " + a.out +
                        ": its export is the dispatch table of every shape's best (`kiln export " +
                        a.target + " --out " + a.out +
                        "`); --candidate names one kernel, which a sweep does not export alone",
                    2);
      }
      std::vector<exporter::ExportCandidate> entries;
      std::set<std::string> models;
      for (auto& c : *swept) {
        models.insert(c.gpu_model.empty() ? "(any GPU)" : c.gpu_model);
        if (a.gpu_model.empty() || c.gpu_model == a.gpu_model) entries.push_back(std::move(c));
      }
      if (entries.empty()) {
        std::string names;
        for (const auto& m : models) names += (names.empty() ? "" : ", ") + m;
        return fail("the sweep of '" + a.target + "' in " + a.out + " has no population on '" +
                        a.gpu_model + "' (it has: " + names + ")",
                    2);
      }
      return run_dispatch_export({a.format, a.dtype, a.to, a.no_verify, a.gpu}, std::move(entries));
    }
  }
  Result<exporter::ExportCandidate> found = find_candidate(a);
  if (!found.is_ok()) return fail(found.status().message(), 2);
  exporter::ExportCandidate& c = *found;
  if (!a.dtype.empty()) {
    Result<DType> d = export_dtype(c, a.dtype);
    if (!d.is_ok()) return fail(d.status().message(), 2);
    c.dtype = *d;
  }
  const std::string format = a.format.empty() ? (c.backend == "cuda" ? "cuda" : "cpp") : a.format;
  Result<std::vector<exporter::ExportFile>> files = render(c, format);
  if (!files.is_ok()) return fail(files.status().message(), 2);
  const std::string to = a.to.empty() ? c.target.name + "-" + format : a.to;
  if (Status s = exporter::check_export_folder(to); !s.is_ok()) return fail(s.message(), 2);

  std::printf("kiln export: %s (%s, %s) %s%s%s from %s\n", c.target.name.c_str(), c.backend.c_str(),
              std::string(dtype_name(c.dtype)).c_str(), c.is_template ? "template " : "seed ",
              exporter::params_text(c.params).c_str(),
              c.candidate_id.empty() ? "" : (", candidate " + c.candidate_id.substr(0, 12)).c_str(),
              c.origin.c_str());
  nlohmann::json here;
  const std::string unavailable = backend_unavailable_here(c.backend);
  if (a.no_verify || !unavailable.empty()) {
    const std::string why = a.no_verify ? "--no-verify" : unavailable;
    if (format == "gpumode" && !a.no_verify) {
      return fail("a submission is verified on every shape of the task before it is written, and " +
                      why +
                      "; run the export on a machine with the GPU, or pass --no-verify to write it "
                      "unverified",
                  1);
    }
    std::printf("  not verified here (%s); the record keeps the run's verification\n", why.c_str());
    here = {{"skipped", why}};
  } else {
    std::printf(
        "  verifying here (five stages at every shape the target lists, then the timing):\n");
    const auto progress = [](const std::string& line) {
      std::printf("    %s\n", line.c_str());
      std::fflush(stdout);
    };
    Result<HereCheck> check = verify_here(c, a.gpu, std::nullopt, progress);
    if (!check.is_ok()) return fail("verifying here: " + check.status().message(), 1);
    if (!check->failure.empty()) {
      return fail("the kernel did not verify here (" + check->failure + "); nothing was written",
                  1);
    }
    here = std::move(check->record);
  }
  if (Status w = exporter::write_export(to, c, format, *files, here); !w.is_ok())
    return fail(w.message(), 1);
  std::printf("wrote %s/:", to.c_str());
  for (const auto& f : *files) std::printf(" %s", f.name.c_str());
  std::printf(" %s kernel/ target/\n", exporter::kRecordFile);
  if (format == "torch") {
    std::printf("use it: sys.path.insert(0, \"%s\"); from %s import %s\n", to.c_str(),
                c.target.name.c_str(), c.target.name.c_str());
  } else if (format == "gpumode") {
    std::printf("submit %s/submission.py to the %s leaderboard\n", to.c_str(),
                c.target.leaderboard->task.c_str());
  } else if (format == "cuda" || format == "cpp") {
    std::printf("build it: include(%s/%s.cmake) in your CMakeLists.txt\n", to.c_str(),
                c.target.name.c_str());
  }
  std::printf("re-check it anywhere: kiln verify %s\n", to.c_str());
  return 0;
}

}  // namespace

void add_export_command(CLI::App& app, std::function<int()>& action) {
  auto a = std::make_shared<ExportArgs>();
  CLI::App* sub = app.add_subcommand(
      "export",
      "Write a verified kernel as files you drop in, with its verification record:\n"
      "  cuda         <target>.cu/.cuh: kernel with its parameters and prelude baked in, a host\n"
      "               launcher that computes grid, block and shared memory for any shape and\n"
      "               checks the constraints, and a CMake snippet (cpp: the same for cpu kernels)\n"
      "  torch        a folder with a PyTorch extension (torch.utils.cpp_extension): one function\n"
      "               taking and returning tensors in the target's argument order\n"
      "  gpumode      a GPU MODE leaderboard submission, for targets that are leaderboard tasks\n"
      "  kernelbench  a KernelBench ModelNew file\n"
      "The kernel comes from a run (--out DIR or --redis URL: its best for this GPU model, or\n"
      "--candidate ID) or from the target itself (--seed, --template --params). Before writing,\n"
      "the kernel is verified again here when this machine has the backend's device.\n"
      "Exit code 0 when written, 1 when the kernel did not verify, 2 for bad usage.");
  sub->add_option("target", a->target, "Target name")->required();
  sub->add_option("--out", a->out, "The run's output folder (kiln run --out)");
  sub->add_option("--redis", a->redis, "The run's Redis (redis://host:port or unix:///path)");
  add_redis_password_option(sub, a->redis_password_file);
  sub->add_option(
      "--gpu-model", a->gpu_model,
      "Which population of a run searched on several GPU models (default: the only one,\n"
      "or this machine's GPU)");
  sub->add_option("--candidate", a->candidate, "A candidate id of the run (default: the best)");
  CLI::Option* seed =
      sub->add_flag("--seed", a->seed, "Export the target's seed kernel (no run needed)");
  sub->add_flag("--template", a->use_template, "Export the target's template (no run needed)")
      ->excludes(seed);
  sub->add_option("--params", a->params,
                  "Template parameters for --template, e.g. BLOCK=256,VEC=8");
  sub->add_option("--backend", a->backend,
                  "For --seed/--template: cuda or cpu (default: cuda where the target has it)")
      ->check(CLI::IsMember({"cuda", "cpu", "triton"}));
  sub->add_option("--dtype", a->dtype,
                  "Element type to export (default: the one the search verified and timed)");
  sub->add_option(
         "--format", a->format,
         "cuda, cpp, torch, gpumode or kernelbench (default: cuda, or cpp for cpu kernels)")
      ->check(CLI::IsMember({"cuda", "cpp", "torch", "gpumode", "kernelbench"}));
  sub->add_option("--to", a->to, "Folder to write (default: ./<target>-<format>)");
  sub->add_flag("--no-verify", a->no_verify, "Write without verifying the kernel here first");
  sub->add_option("--targets-dir", a->targets_dir,
                  "Folders of your own targets, A:B (or A,B), looked up before the built-in ones;\n"
                  "default: $KILN_TARGETS_DIR");
  sub->add_option("--gpu", a->gpu, "GPU ordinal to verify on")->capture_default_str();
  sub->callback([&action, a] { action = [a] { return run_export(*a); }; });
}

}  // namespace kiln::cli
