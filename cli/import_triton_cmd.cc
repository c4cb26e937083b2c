// `kiln import-triton`: the capture (a child Python running the user's file under Triton launch
// hooks, cli/import_triton_*.py), then the target folder written, loaded back as kiln loads any
// target, and its seed compiled by the triton backend's compiler, so that what the user is told
// to run next works.
#include "cli/import_triton_cmd.h"

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/import_triton_files.h"
#include "cli/sweep.h"
#include "evaluator/evaluation.h"
#include "evaluator/reference.h"
#include "evaluator/scratch_dir.h"
#include "evaluator/source_scan.h"
#include "evaluator/toolchain.h"
#include "evaluator/triton/python_scan.h"
#include "evaluator/triton/triton_compiler.h"
#include "shared/expr.h"
#include "shared/fatal.h"
#include "shared/process.h"
#include "shared/target_spec.h"
#include "shared/text.h"

namespace kiln::cli {
namespace {

namespace fs = std::filesystem;

constexpr const char* kKernelFile = "kernel_triton.py";
constexpr size_t kOutputTail = 4000;

struct ImportTritonArgs {
  std::string file;
  std::string kernel;
  std::string out;
  std::vector<std::string> outputs;
  std::string reference;
  std::string python;
  std::string call;
  unsigned timeout_s = 120;
  bool product = false;
  bool force = false;
};

int usage_error(const std::string& why) {
  report_fatal("kiln import-triton: " + why);
  return 2;
}

int import_error(const std::string& why) {
  report_fatal("kiln import-triton: " + why);
  return 1;
}

std::string tail(const std::string& text) {
  if (text.size() <= kOutputTail) return text;
  return "..." + text.substr(text.size() - kOutputTail);
}

std::string capture_python(const ImportTritonArgs& a) {
  return a.python.empty() ? eval::triton_python() : a.python;
}

// Runs the capture; the script's answer, or why there is none (an error for the user).
Result<nlohmann::json> run_capture(const ImportTritonArgs& a, const std::string& name,
                                   std::string* output) {
  KILN_ASSIGN_OR_RETURN(eval::ScratchDir dir, eval::ScratchDir::create("", "kiln-import-triton-"));
  const std::string folder = dir.file("run"), req_file = dir.file("request.json"),
                    resp_file = dir.file("result.json");
  std::error_code ec;
  fs::create_directory(folder, ec);
  if (ec) return internal_error("cannot make " + folder + ": " + ec.message());
  const nlohmann::json req = {{"file", fs::absolute(a.file).string()},
                              {"kernel", a.kernel},
                              {"name", name},
                              {"call", a.call},
                              {"outputs", a.outputs},
                              {"product", a.product},
                              {"folder", folder}};
  KILN_RETURN_IF_ERROR(eval::write_file(req_file, req.dump()));
  const std::string python = capture_python(a);
  const std::string script = std::string(import_triton_module_script()) +
                             import_triton_target_script() + import_triton_capture_script();
  Result<ProcessResult> run =
      run_process({python, "-c", script, req_file, resp_file}, std::chrono::seconds(a.timeout_s));
  if (!run.is_ok()) {
    return unavailable("cannot run the Python '" + python + "' (" + run.status().message() +
                       "): name one that has Triton and your file's imports with --python, or "
                       "set KILN_TRITON_PYTHON (scripts/bootstrap installs Triton into "
                       "~/.cache/kiln/triton-venv)");
  }
  *output = run->output;
  if (run->timed_out) {
    return deadline_exceeded("the file ran past the " + std::to_string(a.timeout_s) +
                             " s deadline (--timeout) without launching '" + a.kernel +
                             "' and was stopped; make it launch the kernel promptly (small "
                             "example inputs, no downloads or training loops before it)");
  }
  Result<std::string> text = eval::read_file(resp_file);
  nlohmann::json resp =
      text.is_ok() ? nlohmann::json::parse(*text, nullptr, false) : nlohmann::json();
  if (!resp.is_object() || !resp.contains("ok")) {
    return internal_error("the capture with '" + python + "' gave no answer (exit code " +
                          std::to_string(run->exit_code) + ", signal " +
                          std::to_string(run->term_signal) +
                          "): the file ended the process itself, or '" + python +
                          "' is not a Python 3 with Triton (--python)");
  }
  if (!resp.value("ok", false)) return failed_precondition(resp.value("error", "(no reason)"));
  return resp;
}

// An existing folder is replaced only with --force, and never one that is not a target's.
Status check_folder(const std::string& out, bool force) {
  std::error_code ec;
  if (!fs::exists(out, ec)) return Status::ok();
  if (!fs::is_directory(out, ec)) return invalid_argument(out + " exists and is not a folder");
  if (fs::is_empty(out, ec)) return Status::ok();
  if (!force) {
    return invalid_argument(out +
                            " exists: choose another --out, or --force to replace "
                            "its target files");
  }
  if (!fs::exists(fs::path(out) / "target.json", ec)) {
    return invalid_argument(out +
                            " is not a target's folder (no target.json): --force "
                            "replaces only a target's files");
  }
  return Status::ok();
}

std::string joined(const std::vector<std::string>& v, const char* sep) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : sep) + x;
  return s;
}

std::string describe_args(const nlohmann::json& target) {
  std::vector<std::string> parts;
  for (const auto& a : target["args"]) {
    std::string s = a.value("name", "");
    if (a.value("role", "") == "scalar") {
      s += " (" + a.value("type", "") + " scalar " + a["value"].dump() + ")";
    } else {
      std::vector<std::string> shape;
      for (const auto& d : a["shape"]) shape.push_back(d.get<std::string>());
      s += "[" + joined(shape, ", ") + "] " + a.value("role", "");
      if (a.value("dtype", "T") != "T") s += " " + a.value("dtype", "");
    }
    parts.push_back(s);
  }
  return joined(parts, ", ");
}

// The seed compiled as `kiln targets --check` compiles it: "" when it compiles or cannot be
// tried here (then *note says why), else the compile log.
std::string compile_seed(const TargetSpec& t, std::string* note) {
  Result<std::unique_ptr<eval::TritonCompiler>> compiler = eval::TritonCompiler::create();
  if (!compiler.is_ok()) {
    *note = "the seed was not compiled here: " + compiler.status().message();
    return "";
  }
  const BackendSpec& b = *t.backend("triton");
  const eval::CandidateSpec c = eval::candidate_of(b.seed, "seed", b.seed.defines);
  Result<eval::CompileRequest> req =
      eval::build_compile_request(t, "triton", "sm_90a", c, b.dtypes.front());
  if (!req.is_ok()) return req.status().message();
  eval::CompileOutput out = (*compiler)->compile(*req);
  if (!out.ok) return out.log;
  *note = "the seed compiles (Triton " + (*compiler)->triton_version() + ", sm_90a)";
  return "";
}

int run_import(const ImportTritonArgs& a) {
  std::error_code ec;
  // What a path is, said as it is: "no file" for a folder or a device misled.
  auto not_a_file = [&](const std::string& path, const std::string& what) {
    const std::string kind = !fs::exists(path, ec)        ? "there is no file "
                             : fs::is_directory(path, ec) ? "a folder, not a file: "
                                                          : "not a regular file: ";
    return usage_error(kind + path + what);
  };
  if (!fs::is_regular_file(a.file, ec)) return not_a_file(a.file, "");
  if (!a.reference.empty() && !fs::is_regular_file(a.reference, ec)) {
    return not_a_file(a.reference, " (--reference)");
  }
  if (!is_identifier(a.kernel)) {
    return usage_error("--kernel '" + log_safe(a.kernel, 60) +
                       "' is not a Python function name (the @triton.jit kernel to capture)");
  }
  const std::string out = a.out.empty() ? a.kernel : a.out;
  fs::path folder = fs::path(out).lexically_normal();
  if (folder.filename().empty()) folder = folder.parent_path();
  const std::string name = folder.filename().string();
  if (!is_identifier(name)) {
    return usage_error("the target is named after its folder, and '" + name +
                       "' is not an identifier: choose another --out");
  }
  if (Status s = check_folder(folder.string(), a.force); !s.is_ok()) {
    return usage_error(s.message());
  }

  std::string output;
  Result<nlohmann::json> captured = run_capture(a, name, &output);
  if (!captured.is_ok()) {
    std::string why = captured.status().message();
    if (!output.empty()) why += "\nwhat the file printed:\n" + tail(output);
    return import_error(why);
  }
  const nlohmann::json& r = *captured;
  const std::string module = r.value("module", "");
  if (std::vector<eval::ScanFinding> f = eval::scan_python(module); !f.empty()) {
    const std::string why =
        "the generated module would fail kiln's scan of Triton sources (only triton, triton.* "
        "and math imports; no exec, eval, open, getattr or dunder names; docs/targets.md):\n";
    return import_error(why + eval::refusal_log(kKernelFile, f) + "\n" + module);
  }
  nlohmann::json target = r["target"];
  const fs::path dir = folder;
  // A reference of the user's is never replaced by a skeleton (a --force re-import keeps it).
  std::string reference;
  bool own_reference = !a.reference.empty(), kept_reference = false;
  if (own_reference) {
    Result<std::string> text = eval::read_file(a.reference);
    if (!text.is_ok()) return usage_error(text.status().message());
    reference = *text;
  } else if (Result<std::string> old = eval::read_file((dir / "reference.cpp").string());
             old.is_ok() && !is_reference_skeleton(*old)) {
    reference = *old;
    own_reference = kept_reference = true;
  } else {
    reference = reference_skeleton(target, a.file, a.kernel);
  }
  std::error_code made;
  fs::create_directories(dir, made);
  if (made) return import_error("cannot make " + dir.string() + ": " + made.message());
  for (const auto& [file, text] :
       {std::pair<std::string, std::string>{"target.json", target.dump(2) + "\n"},
        {kKernelFile, module},
        {"reference.cpp", reference}}) {
    if (Status s = eval::write_file((dir / file).string(), text); !s.is_ok()) {
      return import_error(s.message());
    }
  }

  ImportSummary summary;
  summary.from_file = a.file;
  summary.kernel = a.kernel;
  summary.folder = folder.string();
  summary.own_reference = own_reference;
  if (kept_reference) summary.notes.push_back("kept the folder's own reference.cpp");
  summary.target = target;
  for (const auto& n : r["notes"]) summary.notes.push_back(n.get<std::string>());
  Result<TargetSpec> spec = load_target(dir.string());
  if (!spec.is_ok()) {
    return import_error("the target written to " + dir.string() +
                        " does not load (a bug in kiln import-triton): " + spec.status().message());
  }
  const BackendSpec& b = *spec->backend("triton");
  const ExprVars vars = expr_vars(spec->benchmark, b.dtypes.front(), b.seed.defines);
  const nlohmann::json grid_values = r["grid_values"];
  for (size_t i = 0; i < grid_values.size() && i < 3; ++i) {
    Result<int64_t> g = eval_int_expr(b.seed.grid[i], vars);
    if (!g.is_ok() || *g != grid_values[i].get<int64_t>()) {
      summary.notes.push_back("grid axis " + std::to_string(i) + " (`" + b.seed.grid[i] +
                              "`) is not the launch's " + grid_values[i].dump() +
                              " programs at the benchmark shape: check it");
    }
  }
  if (summary.own_reference) {  // built once to say whether it builds, in a folder of its own
    Result<eval::ScratchDir> cache = eval::ScratchDir::create("", "kiln-import-reference-");
    Result<std::unique_ptr<eval::Reference>> ref =
        cache.is_ok() ? eval::Reference::build(*spec, cache->path())
                      : Result<std::unique_ptr<eval::Reference>>(cache.status());
    if (!ref.is_ok()) {
      summary.notes.push_back("your reference does not build: " + ref.status().message());
    }
  }
  std::string compiled;
  const std::string compile_log = compile_seed(*spec, &compiled);

  const std::string parent = folder.has_parent_path() ? folder.parent_path().string() : ".";
  const std::string where = folder.string();
  if (!summary.own_reference) {
    summary.next.push_back("Fill in `" + where + "/reference.cpp`: `kiln_reference` computes " +
                           "the outputs in fp64 from the inputs (docs/targets.md, \"Reference " +
                           "ABI\"); until then every kernel fails verification.");
  }
  summary.next.push_back("Check it without a GPU: `kiln targets --check " + where +
                         " --backend triton`.");
  summary.next.push_back("Search on a GPU: `kiln run --targets-dir " + parent + " --targets " +
                         name + " --backend triton`.");
  if (Status s = eval::write_file((dir / "IMPORTED.md").string(), imported_markdown(summary));
      !s.is_ok()) {
    return import_error(s.message());
  }

  const nlohmann::json& tb = target["backends"]["triton"];
  std::printf(
      "kiln import-triton: captured '%s' from %s%s\n", a.kernel.c_str(), a.file.c_str(),
      r.value("autotune", false)
          ? (" (@triton.autotune, " + std::to_string(r.value("configs", 0)) + " configs)").c_str()
          : "");
  std::printf("  wrote %s/: target.json, %s, reference.cpp (%s), IMPORTED.md\n", where.c_str(),
              kKernelFile, own_reference ? "yours" : "a skeleton to fill in");
  std::printf("  benchmark shape: %s\n", shape_string(spec->benchmark).c_str());
  std::printf("  args: %s\n", describe_args(target).c_str());
  std::printf("  grid: (%s); seed: %s; template: %zu configurations\n",
              joined(tb["seed"]["grid"].get<std::vector<std::string>>(), ", ").c_str(),
              format_params(b.seed.defines).c_str(),
              b.tunable
                  ? template_configs(*b.tunable, spec->benchmark, b.dtypes.front(), 0, 1).size()
                  : size_t{0});
  if (!compiled.empty()) std::printf("  %s\n", compiled.c_str());
  if (!summary.notes.empty()) std::printf("notes (also in IMPORTED.md):\n");
  for (const auto& n : summary.notes) std::printf("  - %s\n", n.c_str());
  if (!compile_log.empty()) {
    std::printf("\nthe seed does not compile:\n%s\n", compile_log.c_str());
    return import_error("the target is written to " + where +
                        ", but its seed does not compile (the log above): fix " + where + "/" +
                        kKernelFile + " or target.json");
  }
  std::printf("next:\n");
  for (size_t i = 0; i < summary.next.size(); ++i) {
    std::printf("  %zu. %s\n", i + 1, summary.next[i].c_str());
  }
  return 0;
}

}  // namespace

void add_import_triton_command(CLI::App& app, std::function<int()>& action) {
  auto args = std::make_shared<ImportTritonArgs>();
  CLI::App* sub = app.add_subcommand(
      "import-triton",
      "Import a Triton kernel of yours as a kiln target. Runs FILE once (as `python FILE`, or\n"
      "--call FUNC) in a child Python with a deadline, in a private folder, with hooks on\n"
      "Triton's launches: the first launch of the @triton.jit kernel NAME is captured and not\n"
      "made (no GPU needed; other kernels are skipped), with its source, arguments (tensors:\n"
      "anything with data_ptr(), dtype, shape and stride(); integers; floats), constexprs, grid,\n"
      "num_warps and num_stages, and a @triton.autotune's configs. Writes a target folder:\n"
      "target.json (dims named after your integer arguments, the captured shape as the\n"
      "benchmark, smaller verification shapes, the autotune configs as the template's space),\n"
      "kernel_triton.py (your kernel and an entry point in kiln's calling convention),\n"
      "reference.cpp (a skeleton you fill in, or --reference) and IMPORTED.md (what was guessed).\n"
      "Then: kiln targets --check DIR --backend triton; kiln run --targets-dir PARENT --targets\n"
      "NAME --backend triton. See docs/import-triton.md.");
  sub->add_option("file", args->file, "Your Python file: it launches the kernel when run")
      ->required();
  sub->add_option("--kernel,-k", args->kernel, "The @triton.jit function to import")->required();
  sub->add_option("--out,-o", args->out,
                  "The target's folder (default ./NAME); its last part names the target");
  sub->add_option("--outputs", args->outputs,
                  "The tensor arguments the kernel writes, a,b (default: those that reach a\n"
                  "tl.store or an atomic in the kernel's source)")
      ->delimiter(',');
  sub->add_option("--reference", args->reference,
                  "Your reference.cpp (kiln_reference in fp64, docs/targets.md) instead of a "
                  "skeleton");
  sub->add_option("--python", args->python,
                  "The Python to run FILE with: it needs Triton and FILE's imports (default:\n"
                  "$KILN_TRITON_PYTHON, else ~/.cache/kiln/triton-venv, else python3)");
  sub->add_option("--call", args->call,
                  "Import FILE and call this function of it (no arguments) instead of running\n"
                  "FILE as a script");
  sub->add_option("--timeout", args->timeout_s,
                  "Seconds FILE may run before it launches the kernel")
      ->capture_default_str()
      ->check(CLI::Range(1, 86400));
  sub->add_flag("--product", args->product,
                "With @triton.autotune: search every combination of the configs' values, not\n"
                "only the listed configs");
  sub->add_flag("--force", args->force,
                "Replace the target files of an existing --out folder (a reference.cpp that is\n"
                "no longer the skeleton is kept)");
  sub->callback([&action, args] { action = [args] { return run_import(*args); }; });
}

}  // namespace kiln::cli
