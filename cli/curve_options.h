// The CURVE options of the coordinator side (`kiln coordinator`, `kiln run`) and of the worker side
// (`kiln evaluator`, `kiln agent`), and the rule that turns them into socket settings
// (docs/security.md): CURVE is on whenever the coordinator binds an address other machines can
// reach, unless --insecure says otherwise; on loopback it is on only when keys are given.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "shared/curve_keys.h"
#include "shared/status.h"
#include "shared/transport.h"

namespace kiln::cli {

struct CoordinatorCurveArgs {
  std::string curve_secret;  // --curve-secret: the coordinator's NAME.key
  std::string allow;      // --allow: a folder of worker NAME.pub files, or a `NAME KEY` list file
  bool insecure = false;  // --insecure: no CURVE even on a network address
};

// Adds --curve-secret, --allow and --insecure. `starts_workers`: `kiln run`, whose own evaluators
// get per-run keys.
void add_coordinator_curve_options(CLI::App* sub, CoordinatorCurveArgs& args, bool starts_workers);

struct CoordinatorCurve {
  net::CurveServer server;  // empty: CURVE off
  net::AllowList allowed;
  // For the workers the process starts itself (`kiln run`): --curve-secret and --coordinator-key
  // with per-run keys; empty when CURVE is off.
  std::vector<std::string> local_worker_args;
};

// Applies the rule to `bind`. `run_keys_dir` (kiln run: <out>/keys) is where per-run keys for its
// own workers are made; empty for `kiln coordinator`, which must be given every key. Errors say
// how to make keys (`kiln keys`) or how to turn CURVE off (--insecure); `who` prefixes warnings.
Result<CoordinatorCurve> resolve_coordinator_curve(const CoordinatorCurveArgs& args,
                                                   const std::string& bind, const std::string& who,
                                                   const std::string& run_keys_dir);

struct WorkerCurveArgs {
  std::string curve_secret;     // --curve-secret: the worker's NAME.key
  std::string coordinator_key;  // --coordinator-key: the coordinator's NAME.pub
};

void add_worker_curve_options(CLI::App* sub, WorkerCurveArgs& args);

// Both files or neither; without them, a warning when `connect` is not a loopback address.
Result<net::CurveClient> resolve_worker_curve(const WorkerCurveArgs& args,
                                              const std::string& connect, const std::string& who);

}  // namespace kiln::cli
