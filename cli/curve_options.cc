// See curve_options.h.
#include "cli/curve_options.h"

#include <spdlog/spdlog.h>

#include <cstdio>

namespace kiln::cli {
namespace {

// The name kiln run gives the key of the evaluators it starts itself.
constexpr const char* kLocalWorkerKey = "kiln-run-local";

std::string how_to_make_keys(const std::string& bind) {
  return "Make keys and start again:\n"
         "  kiln keys new --out keys --name coordinator        # the coordinator's keypair\n"
         "  kiln keys new --out workers --name gpu-node-1      # one per worker; move "
         "gpu-node-1.key to it\n"
         "  kiln coordinator --bind " +
         bind +
         " --curve-secret keys/coordinator.key --allow workers ...\n"
         "  kiln evaluator --connect tcp://THIS_HOST:PORT --curve-secret gpu-node-1.key "
         "--coordinator-key coordinator.pub ...\n"
         "or bind a loopback address (tcp://127.0.0.1:PORT), or pass --insecure to let any peer "
         "that reaches "
         "the port act as a worker (docs/security.md)";
}

// `r`, its error prefixed with the option that named the file.
template <typename T>
Result<T> for_option(Result<T> r, const char* option) {
  if (!r.is_ok()) return r.status().with_context(option);
  return r;
}

}  // namespace

void add_coordinator_curve_options(CLI::App* sub, CoordinatorCurveArgs& args, bool starts_workers) {
  sub->add_option(
         "--curve-secret", args.curve_secret,
         "The coordinator's CURVE secret key (NAME.key from `kiln keys new`): workers are\n"
         "authenticated and the link encrypted. Required with --allow when --bind is not a\n"
         "loopback address (docs/security.md)" +
             std::string(starts_workers ? "; kiln run makes a per-run one in <out>/keys otherwise"
                                        : ""))
      ->check(CLI::ExistingFile);
  sub->add_option(
         "--allow", args.allow,
         "The worker keys to admit: a folder of NAME.pub files, or a file of `NAME KEY` lines\n"
         "(`kiln keys allow`); each worker is logged under its key's NAME" +
             std::string(starts_workers ? ". kiln run's own evaluators get a per-run key" : ""))
      ->check(CLI::ExistingPath);
  sub->add_flag("--insecure", args.insecure,
                "Bind a network address without CURVE: anyone who reaches the port can act as a\n"
                "worker. Only on a network you trust completely");
}

Result<CoordinatorCurve> resolve_coordinator_curve(const CoordinatorCurveArgs& args,
                                                   const std::string& bind, const std::string& who,
                                                   const std::string& run_keys_dir) {
  CoordinatorCurve out;
  const bool keys_given = !args.curve_secret.empty() || !args.allow.empty();
  const bool loopback = net::is_loopback_endpoint(bind);
  if (args.insecure) {
    if (keys_given)
      return invalid_argument(
          "--insecure turns CURVE off; give either it or --curve-secret/--allow");
    if (!loopback) {
      std::fprintf(stderr,
                   "%s: WARNING: --insecure: %s accepts ANY peer that reaches it as a worker, "
                   "unauthenticated and "
                   "unencrypted; it can read every task and send false results\n",
                   who.c_str(), bind.c_str());
      spdlog::warn(
          "--insecure: {} is reachable from the network without CURVE; any peer can act as a "
          "worker",
          bind);
    }
    return out;
  }
  if (!keys_given && loopback) return out;  // only this machine can connect
  if (run_keys_dir.empty()) {               // kiln coordinator: every key is the operator's
    if (!keys_given) {
      return failed_precondition(
          bind +
          " is reachable from other machines, so workers must authenticate with "
          "CURVE keys (--curve-secret and --allow). " +
          how_to_make_keys(bind));
    }
    if (args.curve_secret.empty() || args.allow.empty()) {
      return invalid_argument(
          std::string("CURVE needs both --curve-secret (the coordinator's NAME.key) and --allow ") +
          "(the workers' keys); " + (args.curve_secret.empty() ? "--curve-secret" : "--allow") +
          " is missing. " + how_to_make_keys(bind));
    }
  }
  net::CurveKeyPair server;
  std::string server_pub;
  if (!args.curve_secret.empty()) {
    KILN_ASSIGN_OR_RETURN(
        server, for_option(net::read_secret_key_file(args.curve_secret), "--curve-secret"));
  } else {  // kiln run on a network address: a keypair for this run
    KILN_ASSIGN_OR_RETURN(server, net::generate_curve_keypair());
    KILN_RETURN_IF_ERROR(net::write_curve_key_files(run_keys_dir, "coordinator", server, true));
    server_pub = run_keys_dir + "/coordinator.pub";
  }
  if (!args.allow.empty()) {
    KILN_ASSIGN_OR_RETURN(out.allowed, for_option(net::read_allow_list(args.allow), "--allow"));
  }
  out.allowed.source = args.allow;
  if (!run_keys_dir.empty()) {  // kiln run's own evaluators and agent
    KILN_ASSIGN_OR_RETURN(net::CurveKeyPair local, net::generate_curve_keypair());
    KILN_RETURN_IF_ERROR(net::write_curve_key_files(run_keys_dir, kLocalWorkerKey, local, true));
    for (const auto& [key, name] : out.allowed.names_by_key) {
      if (name == kLocalWorkerKey) {
        return invalid_argument(std::string("--allow names a key '") + kLocalWorkerKey +
                                "', the name kiln run gives its own evaluators' key; rename it");
      }
    }
    out.allowed.names_by_key[local.public_key] = kLocalWorkerKey;
    out.allowed.source = args.allow.empty() ? run_keys_dir : args.allow + " and " + run_keys_dir;
    if (server_pub.empty()) {  // the coordinator's key is the operator's: its public half for the
                               // children
      server_pub = run_keys_dir + "/coordinator.pub";
      KILN_RETURN_IF_ERROR(
          net::write_public_key_file(server_pub, "coordinator", server.public_key, true));
    }
    out.local_worker_args = {"--curve-secret", run_keys_dir + "/" + kLocalWorkerKey + ".key",
                             "--coordinator-key", server_pub};
  }
  out.server = {server.public_key, server.secret_key};
  return out;
}

void add_worker_curve_options(CLI::App* sub, WorkerCurveArgs& args) {
  sub->add_option(
         "--curve-secret", args.curve_secret,
         "This worker's CURVE secret key (NAME.key from `kiln keys new`; its NAME.pub must be on\n"
         "the coordinator's --allow list). Needed, with --coordinator-key, to join a coordinator\n"
         "that binds a network address (docs/security.md)")
      ->check(CLI::ExistingFile);
  sub->add_option(
         "--coordinator-key", args.coordinator_key,
         "The coordinator's CURVE public key (its NAME.pub): the worker only talks to the holder\n"
         "of the matching secret")
      ->check(CLI::ExistingFile);
}

Result<net::CurveClient> resolve_worker_curve(const WorkerCurveArgs& args,
                                              const std::string& connect, const std::string& who) {
  if (args.curve_secret.empty() != args.coordinator_key.empty()) {
    return invalid_argument(
        std::string("CURVE needs both --curve-secret (this worker's NAME.key) and ") +
        "--coordinator-key (the coordinator's NAME.pub); " +
        (args.curve_secret.empty() ? "--curve-secret" : "--coordinator-key") + " is missing");
  }
  if (args.curve_secret.empty()) {
    if (!net::is_loopback_endpoint(connect)) {
      std::fprintf(stderr,
                   "%s: connecting to %s without CURVE keys: a coordinator on a network address "
                   "refuses such "
                   "workers (they see no error, only no work) unless it runs with --insecure; pass "
                   "--curve-secret and --coordinator-key (docs/security.md)\n",
                   who.c_str(), connect.c_str());
    }
    return net::CurveClient{};
  }
  KILN_ASSIGN_OR_RETURN(net::CurveKeyPair own,
                        for_option(net::read_secret_key_file(args.curve_secret), "--curve-secret"));
  KILN_ASSIGN_OR_RETURN(
      std::string server,
      for_option(net::read_public_key_file(args.coordinator_key), "--coordinator-key"));
  return net::CurveClient{own.public_key, own.secret_key, server};
}

}  // namespace kiln::cli
