// `kiln agent --connect tcp://HOST:PORT [--proposer builtin | --llm CONFIG]`: runs a proposal
// agent until SIGINT or SIGTERM or until the coordinator says bye. `--llm CONFIG` selects the LLM
// proposer (agent/llm/, docs/llm.md).
#include "cli/agent_cmd.h"

#include <cstdio>
#include <sstream>

#include "agent/agent_daemon.h"
#include "cli/curve_options.h"
#include "cli/option_checks.h"
#include "cli/stop_signal.h"
#include "shared/backends.h"
#include "shared/endpoint.h"
#include "shared/fatal.h"
#include "shared/target_path.h"

namespace kiln::cli {
namespace {

int run_agent(agent::AgentOptions options, const std::string& backends,
              const WorkerCurveArgs& curve) {
  if (Status s = net::validate_endpoint(options.connect, net::EndpointUse::kConnect); !s.is_ok()) {
    report_fatal("kiln agent: --connect " + s.message());
    return 2;
  }
  Result<net::CurveClient> keys = resolve_worker_curve(curve, options.connect, "kiln agent");
  if (!keys.is_ok()) {
    report_fatal("kiln agent: " + keys.status().message());
    return 2;
  }
  options.curve = std::move(keys).value();
  if (Status s = check_target_folders(options.targets_dir); !s.is_ok()) {
    report_fatal("kiln agent: " + s.message());
    return 2;
  }
  if (!options.llm_config.empty()) {
    if (options.proposer != "builtin" && options.proposer != "llm") {
      report_fatal("kiln agent: --llm goes with the llm proposer, not '" + options.proposer + "'");
      return 2;
    }
    options.proposer = "llm";
  }
  std::stringstream list(backends);
  for (std::string b; std::getline(list, b, ',');) {
    if (b.empty()) continue;
    if (!is_backend(b)) {
      report_fatal("kiln agent: --backends takes cuda, cpu and/or triton, not '" + b + "'");
      return 2;
    }
    options.backends.push_back(b);
  }
  StopOnSignal stop(StopOnSignal::Syscalls::kInterrupt);
  Status s = agent::run_agent_daemon(options, StopOnSignal::flag());
  if (!s.is_ok()) {
    report_fatal("kiln agent: " + s.message());
    return s.code() == StatusCode::kInvalidArgument ? 2 : 1;
  }
  return 0;
}

}  // namespace

void add_agent_command(CLI::App& app, std::function<int()>& action) {
  auto o = std::make_shared<agent::AgentOptions>();
  auto backends = std::make_shared<std::string>();
  auto curve = std::make_shared<WorkerCurveArgs>();
  CLI::App* sub = app.add_subcommand(
      "agent",
      "Run a proposal agent: connects to a coordinator (`kiln coordinator` or `kiln run`, whose\n"
      "endpoint is in <out>/endpoint), takes `propose` tasks (a target and its parents) and answers\n"
      "with new candidates. `--proposer builtin` makes template configurations with kiln's search\n"
      "operators (mutation in the playbook's tier order, crossover, variant switch); the coordinator\n"
      "dedupes, evaluates and judges them. `--llm CONFIG` asks language models instead (OpenAI-compatible\n"
      "or Anthropic APIs; docs/llm.md): rewrites of the parent guided by its profile, and repairs of\n"
      "children that failed with their logs. Agents add proposal capacity beside the coordinator's own\n"
      "built-in proposer; several may connect. Stop with SIGINT/SIGTERM.");
  sub->add_option("--connect", o->connect, "Coordinator endpoint, e.g. tcp://10.0.0.5:5555")->required();
  sub->add_option("--proposer", o->proposer, "Proposer: builtin or llm (llm needs --llm)")
      ->capture_default_str();
  sub->add_option("--llm", o->llm_config,
                  "LLM proposer config (JSON: models, endpoints, key variables, budget; see docs/llm.md)");
  sub->add_option("--stats", o->stats_path, "Write the proposer's statistics (JSON) to this file after each task");
  sub->add_option("--targets-dir", o->targets_dir,
                  "Folders of your own targets, A:B (or A,B), looked up before the built-in ones;\n"
                  "default: $KILN_TARGETS_DIR (the coordinator's targets must be the same)");
  sub->add_option("--backends", *backends, "Backends it proposes for, comma-separated (default: any)");
  sub->add_option("--capacity", o->capacity, "Propose tasks held at once (1 to 1024)")
      ->check(CLI::Range(1u, 1024u))
      ->capture_default_str();
  sub->add_option("--seed", o->seed, "Random seed of the proposer")->capture_default_str();
  sub->add_option("--worker-id", o->worker_id, "Stable id (default: host-agent-pid)")
      ->check(printable_name());
  sub->add_option("--heartbeat-ms", o->heartbeat.interval_ms, "Heartbeat interval (100 to 60000)")
      ->check(CLI::Range(100, 60000))
      ->capture_default_str();
  add_worker_curve_options(sub, *curve);
  sub->callback([&action, o, backends, curve] {
    action = [o, backends, curve] { return run_agent(*o, *backends, *curve); };
  });
}

}  // namespace kiln::cli
