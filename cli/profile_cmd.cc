// `kiln profile [options] -- COMMAND ARGS...`: runs the program with CUDA_INJECTION64_PATH naming
// libkiln_inject.so and KILN_PROFILE_DIR naming a trace folder, so every process of it that
// initialises CUDA records its kernels (inject/kiln_inject.cc); then reads the traces, ranks the
// kernels with Amdahl's-law gains, prints the ranking and writes plan.json. The program's exit
// code is kiln's (128 + signal when it was killed). `--from-traces DIR` ranks recorded traces
// without running anything. Exit code 2: kiln could not start the profile (bad options, no
// injection library, unusable trace folder).
#include "cli/profile_cmd.h"

#include <dlfcn.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "evaluator/profile/plan.h"
#include "evaluator/profile/plan_table.h"
#include "evaluator/profile/trace.h"
#include "shared/child_process.h"
#include "shared/fatal.h"

extern char** environ;

namespace kiln::cli {
namespace {

namespace fs = std::filesystem;

constexpr const char* kInjectName = "libkiln_inject.so";
constexpr size_t kMaxWarningsShown = 20;

struct ProfileArgs {
  std::vector<std::string> command;
  std::string out = "plan.json";
  size_t top = 20;
  double speedup = 2.0;
  std::string keep_traces;
  std::string from_traces;
  std::string inject;
};

int fail(const std::string& message) {
  report_fatal("kiln profile: " + message);
  return 2;
}

// The injection library that ships with this kiln: <bin>/../lib (a bundle and the build tree,
// where CMake puts it in build/lib), then <bin>/lib.
std::string default_inject_path() {
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return "";
  for (const fs::path& p : {exe.parent_path() / ".." / "lib" / kInjectName,
                            exe.parent_path() / "lib" / kInjectName}) {
    if (fs::exists(p, ec)) return fs::weakly_canonical(p, ec).string();
  }
  return (exe.parent_path() / ".." / "lib" / kInjectName).lexically_normal().string();
}

// The library must load (its libcupti resolves) and export the entry point; CUDA would otherwise
// skip it silently and the program would run unprofiled.
Status check_inject_library(const std::string& path, bool given) {
  std::error_code ec;
  if (!fs::exists(path, ec) && given) return not_found("no injection library at " + path + " (--inject)");
  if (!fs::exists(path, ec)) {
    return not_found(
        "no injection library at " + path +
        ": this kiln was built without it (it needs the CUDA toolkit's CUPTI at build time: "
        "install the toolkit, re-run cmake and build), or pass --inject PATH/" + kInjectName);
  }
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    return failed_precondition(
        "cannot load " + path + ": " + (why ? why : "unknown error") +
        "\n  libcupti.so comes with the CUDA toolkit: add its folder to LD_LIBRARY_PATH, e.g.\n"
        "  export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/local/cuda/extras/CUPTI/lib64:"
        "$LD_LIBRARY_PATH");
  }
  const bool has_entry = dlsym(handle, "InitializeInjection") != nullptr;
  dlclose(handle);
  if (!has_entry) return failed_precondition(path + " does not export InitializeInjection()");
  return Status::ok();
}

// The trace folder: --keep-traces DIR (created; must hold no traces yet) or a fresh temporary one.
Result<std::string> make_trace_dir(const std::string& keep) {
  std::error_code ec;
  if (!keep.empty()) {
    fs::create_directories(keep, ec);
    if (ec) return unavailable("cannot create trace folder " + keep + ": " + ec.message());
    for (const auto& entry : fs::directory_iterator(keep, ec)) {
      if (entry.path().extension() == ".jsonl") {
        return failed_precondition("--keep-traces " + keep + " already holds traces (" +
                                   entry.path().filename().string() +
                                   "); name an empty or new folder");
      }
    }
    return fs::absolute(keep).string();
  }
  std::string templ = (fs::temp_directory_path(ec) / "kiln-profile-XXXXXX").string();
  if (mkdtemp(templ.data()) == nullptr) {
    return unavailable("cannot create a temporary trace folder: " + std::string(std::strerror(errno)));
  }
  return templ;
}

// Runs the program with the profiling environment; returns its exit code (128 + signal when
// killed). Ctrl-C reaches the program (same process group); kiln ignores it while it waits so it
// can still rank what was recorded.
Result<int> run_program(const std::vector<std::string>& command, const std::string& inject,
                        const std::string& trace_dir) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::strncmp(*e, "CUDA_INJECTION64_PATH=", 22) == 0 ||
        std::strncmp(*e, "NVTX_INJECTION64_PATH=", 22) == 0 ||
        std::strncmp(*e, "KILN_PROFILE_DIR=", 17) == 0) {
      continue;
    }
    env.emplace_back(*e);
  }
  env.push_back("CUDA_INJECTION64_PATH=" + inject);
  // The same library takes NVTX's injection too and hands it to CUPTI, so that each kernel's
  // line carries the NVTX range it was launched in (PyTorch's operator and input sizes).
  env.push_back("NVTX_INJECTION64_PATH=" + inject);
  env.push_back("KILN_PROFILE_DIR=" + trace_dir);
  struct sigaction ignore{}, old_int{}, old_quit{};
  ignore.sa_handler = SIG_IGN;
  sigaction(SIGINT, &ignore, &old_int);
  sigaction(SIGQUIT, &ignore, &old_quit);
  // The child starts with every signal at its default disposition (ChildProcess), so Ctrl-C
  // reaches the program while kiln ignores it.
  SpawnOptions spawn;
  spawn.argv = command;
  spawn.env = std::move(env);
  Result<ChildProcess> child = ChildProcess::spawn(spawn);
  ExitStatus status;
  if (child.is_ok()) status = child->wait();
  sigaction(SIGINT, &old_int, nullptr);
  sigaction(SIGQUIT, &old_quit, nullptr);
  if (!child.is_ok()) return not_found(child.status().message());
  return status.term_signal != 0 ? 128 + status.term_signal : status.exit_code;
}

void print_warnings(const profile::TraceSet& set) {
  for (size_t i = 0; i < set.warnings.size() && i < kMaxWarningsShown; ++i) {
    std::fprintf(stderr, "kiln profile: warning: %s\n", set.warnings[i].c_str());
  }
  if (set.warnings.size() > kMaxWarningsShown) {
    std::fprintf(stderr, "kiln profile: ... and %zu more warnings\n",
                 set.warnings.size() - kMaxWarningsShown);
  }
}

// Reads, ranks, prints and writes the plan. Returns 0, or 1 when there is nothing to rank (the
// message says why), or 2 when the traces cannot be read or the plan cannot be written.
int rank_traces(const ProfileArgs& a, const std::string& dir, bool ran_program) {
  Result<profile::TraceSet> set = profile::read_trace_dir(dir);
  if (!set.is_ok()) return fail(set.status().message());
  print_warnings(*set);
  if (set->kernels.empty()) {
    if (set->processes.empty()) {
      std::fprintf(stderr,
                   "kiln profile: no CUDA kernels were recorded: %s\n",
                   ran_program
                       ? "no process of the program initialised CUDA (it runs no CUDA code, or "
                         "found no GPU or driver: check nvidia-smi and that the program uses "
                         "the GPU)"
                       : ("no trace files (*.jsonl) in " + dir).c_str());
    } else {
      std::fprintf(stderr,
                   "kiln profile: no CUDA kernels were recorded: %zu process(es) initialised "
                   "CUDA but launched no kernel (or CUPTI failed: see the warnings above)\n",
                   set->processes.size());
    }
    return 1;
  }
  std::vector<profile::KernelStat> stats = profile::aggregate_kernels(set->kernels);
  profile::Plan plan = profile::make_plan(stats, a.speedup, set->processes.size());
  plan.command = a.command;
  const uint64_t with_range = profile::add_plan_shapes(set->kernels, &plan);
  std::fputs(profile::format_ranking(plan, a.top).c_str(), stdout);
  std::fputs(profile::format_shapes(plan, with_range, set->kernels.size()).c_str(), stdout);
  if (!a.out.empty()) {
    if (Status s = profile::write_plan(plan, a.out); !s.is_ok()) return fail(s.message());
    std::printf("plan written to %s\n", a.out.c_str());
  }
  return 0;
}

int run_profile(const ProfileArgs& a) {
  if (!(a.speedup > 0)) return fail("--speedup must be a positive number");
  if (!a.from_traces.empty()) {
    if (!a.command.empty()) return fail("--from-traces ranks recorded traces: give no command");
    return rank_traces(a, a.from_traces, /*ran_program=*/false);
  }
  if (a.command.empty()) {
    return fail("no program to profile: kiln profile [options] -- COMMAND ARGS... "
                "(or --from-traces DIR)");
  }
  const std::string inject = a.inject.empty() ? default_inject_path()
                                              : fs::absolute(a.inject).lexically_normal().string();
  if (Status s = check_inject_library(inject, !a.inject.empty()); !s.is_ok()) return fail(s.message());
  Result<std::string> dir = make_trace_dir(a.keep_traces);
  if (!dir.is_ok()) return fail(dir.status().message());
  const bool temporary = a.keep_traces.empty();
  std::fprintf(stderr, "kiln profile: running %s (traces in %s)\n", a.command[0].c_str(),
               dir->c_str());
  Result<int> exit_code = run_program(a.command, inject, *dir);
  int code = 2;
  if (!exit_code.is_ok()) {
    fail(exit_code.status().message());
  } else {
    if (*exit_code != 0) {
      std::fprintf(stderr, "kiln profile: the program exited with code %d; ranking what it ran\n",
                   *exit_code);
    }
    const int ranked = rank_traces(a, *dir, /*ran_program=*/true);
    code = ranked == 2 ? 2 : *exit_code;  // the program's code, unless kiln itself failed
  }
  if (temporary) {
    std::error_code ec;
    fs::remove_all(*dir, ec);
  }
  return code;
}

}  // namespace

void add_profile_command(CLI::App& app, std::function<int()>& action) {
  auto args = std::make_shared<ProfileArgs>();
  CLI::App* sub = app.add_subcommand(
      "profile",
      "Profile a whole program: run it with kiln's CUPTI injection library (every process that\n"
      "uses CUDA records its kernels), rank the kernels by GPU time with the end-to-end gain of\n"
      "making each one --speedup times faster (Amdahl), map them to kiln's targets and write\n"
      "plan.json for `kiln run --plan`. Exit code: the program's. See docs/profile.md.\n"
      "  kiln profile --out plan.json -- python3 train.py --steps 5");
  sub->add_option("command", args->command, "The program and its arguments, after --");
  sub->add_option("--out", args->out, "Write the plan here")->capture_default_str();
  sub->add_option("--top", args->top, "Kernels shown in the ranking")->capture_default_str();
  sub->add_option("--speedup", args->speedup, "Per-kernel speedup the end-to-end gains assume")
      ->capture_default_str();
  sub->add_option("--keep-traces", args->keep_traces,
                  "Keep the per-process trace files in this folder (default: a temporary one)");
  sub->add_option("--from-traces", args->from_traces,
                  "Rank the trace files of this folder instead of running a program");
  sub->add_option("--inject", args->inject,
                  std::string("The injection library (default: <kiln>/../lib/") + kInjectName + ")");
  sub->callback([&action, args] { action = [args] { return run_profile(*args); }; });
}

}  // namespace kiln::cli
