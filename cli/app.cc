// Subcommand wiring for `kiln`. Each subcommand's work lives in its component library; this file
// only declares options, configures logging once and dispatches.
#include "cli/app.h"

#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <functional>
#include <ios>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "cli/agent_cmd.h"
#include "cli/daemon_cmd.h"
#include "cli/deploy_cmd.h"
#include "cli/eval_cmd.h"
#include "cli/export_cmd.h"
#include "cli/import_triton_cmd.h"
#include "cli/keys_cmd.h"
#include "cli/profile_cmd.h"
#include "cli/report_cmd.h"
#include "cli/run_cmd.h"
#include "cli/selftest_cmd.h"
#include "cli/status_cmd.h"
#include "cli/targets_cmd.h"
#include "cli/version_cmd.h"
#include "evaluator/sandbox_child.h"
#include "shared/fatal.h"
#include "shared/logging.h"
#include "shared/text.h"

namespace kiln::cli {
namespace {

constexpr const char* kDescription =
    "kiln: distributed, profile-guided search for fast GPU kernels.\n"
    "A coordinator keeps verified candidate kernels per target and GPU model in Redis, fans\n"
    "proposal and evaluation tasks out over ZeroMQ to agents and one evaluator per GPU, and keeps\n"
    "the fastest verified kernels. `kiln run` does it all on one machine.";

// The first argument before `--` that is `--name=` with nothing after the '=', or "".
std::string empty_assignment(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--") break;  // what follows is another program's (kiln profile -- COMMAND)
    if (arg.size() > 3 && arg.substr(0, 2) == "--" && arg.find('=') == arg.size() - 1) {
      return log_safe(arg, 60);
    }
  }
  return "";
}

// The first option of the chosen subcommands given an empty value ("--source ''", "--out $UNSET"),
// named as the user wrote it, or "". Every option of kiln takes an empty value as not given, so
// taking it silently would run something other than what was asked.
std::string option_given_empty(const CLI::App& app) {
  for (const CLI::App* sub : app.get_subcommands()) {
    for (const CLI::Option* o : sub->get_options()) {
      if (o->count() == 0 || o->get_items_expected_min() == 0) continue;  // absent, or a flag
      // A program's arguments (kiln profile -- COMMAND...) may be empty strings.
      if (o->get_positional() && o->get_items_expected_max() > 1) continue;
      for (const std::string& value : o->results()) {
        if (value.empty()) return o->get_name();
      }
    }
    if (std::string nested = option_given_empty(*sub); !nested.empty()) return nested;
  }
  return "";
}

int run_action(const std::function<int()>& action);

}  // namespace

int run_app(int argc, char** argv) {
  // Hidden: the sandbox child (evaluator/sandbox.h) runs before any option parsing or logging.
  if (argc >= 2 && std::string_view(argv[1]) == "__sandbox") {
    return kiln::eval::sandbox_child_main(argc - 1, argv + 1);
  }
  CLI::App app{kDescription, "kiln"};
  app.require_subcommand(1);
  app.set_help_all_flag("--help-all", "Print help for every subcommand");

  LogOptions log;
  app.add_option("--log-level", log.level, "trace, debug, info, warn, error or off")
      ->capture_default_str();
  app.add_flag("--log-json", log.json, "Write logs as JSON lines");
  app.add_option("--log-file", log.file,
                 "Append logs to this file instead of stderr (flushed after every line; fatal\n"
                 "errors go there too)");

  std::function<int()> action;

  auto* version = app.add_subcommand(
      "version", "Print kiln's version and commit, and the CUDA driver, NVRTC and GPUs found");
  bool version_json = false;
  version->add_flag("--json", version_json, "Print one JSON object");
  version->callback([&] {
    action = [&] {
      std::fputs(version_report(version_json).c_str(), stdout);
      return 0;
    };
  });

  add_eval_command(app, action);
  add_targets_command(app, action);
  add_import_triton_command(app, action);
  add_run_command(app, action);
  add_coordinator_command(app, action);
  add_status_command(app, action);
  add_selftest_command(app, action);
  add_evaluator_command(app, action);
  add_agent_command(app, action);
  add_profile_command(app, action);
  add_keys_command(app, action);
  add_deploy_command(app, action);
  add_export_command(app, action);
  add_verify_command(app, action);
  add_report_command(app, action);

  if (std::string bad = empty_assignment(argc, argv); !bad.empty()) {
    std::fprintf(stderr,
                 "kiln: %s gives the option no value (the parser would take the next argument "
                 "as its value); write %sVALUE, or leave the option out\n",
                 bad.c_str(), bad.c_str());
    return 2;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  if (std::string empty = option_given_empty(app); !empty.empty()) {
    std::fprintf(stderr,
                 "kiln: %s was given an empty value (a shell variable that is not set?); give "
                 "it a value, or leave it out for its default\n",
                 empty.c_str());
    return 2;
  }
  // Every line names the process's role (the subcommand: run, coordinator, evaluator, agent,
  // eval, ...) and its pid, so the lines of the processes of one run can be told apart.
  for (const CLI::App* sub : app.get_subcommands()) log.component = sub->get_name();
  if (Status s = configure_logging(log); !s.is_ok()) {
    std::fprintf(stderr, "kiln: %s\n", s.message().c_str());
    return 2;
  }
  if (!action) return 2;
  // A reader that goes away (`kiln run | head -1`) must not kill a run halfway, with its Redis
  // and evaluators left behind and nothing written: writes fail with EPIPE instead. A handler,
  // not SIG_IGN, so that the programs kiln starts get the default back when they exec.
  std::signal(SIGPIPE, [](int) {});
  const int code = run_action(action);
  // Output that could not be written to a file or device (a full disk, `> /dev/full`) is a
  // failure; a pipe whose reader left early is not.
  errno = 0;
  struct stat out_stat {};
  const bool to_pipe = fstat(STDOUT_FILENO, &out_stat) == 0 &&
                       (S_ISFIFO(out_stat.st_mode) || S_ISSOCK(out_stat.st_mode));
  if ((std::fflush(stdout) != 0 || std::ferror(stdout)) && errno != EPIPE && !to_pipe) {
    const std::string why = errno != 0 ? std::strerror(errno) : "an earlier write failed";
    std::fprintf(stderr, "kiln: writing the output failed: %s\n", why.c_str());
    return code == 0 ? 1 : code;
  }
  return code;
}

namespace {

int run_action(const std::function<int()>& action) {
  // An exception no command caught still unwinds the stack, so that what the command started (a
  // private redis-server, evaluator processes) is stopped by its owner, and the log says why.
  try {
    return action();
  } catch (const nlohmann::json::exception& e) {
    // A field of a file kiln wrote holds another type than kiln writes there: bad input.
    report_fatal(std::string("kiln: a JSON file read here does not hold what kiln writes (") +
                 e.what() + "); was it changed by hand?");
    return 2;
  } catch (const std::ios_base::failure& e) {
    report_fatal(std::string("kiln: reading a file failed: ") + e.what() +
                 " (a folder where a file was expected?)");
    return 2;
  } catch (const std::exception& e) {
    report_fatal(std::string("kiln: unexpected error: ") + e.what());
    return 1;
  }
}

}  // namespace

}  // namespace kiln::cli
