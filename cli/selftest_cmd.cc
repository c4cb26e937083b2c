// `kiln selftest`: starts a private redis-server (the bundled one beside kiln when present), does a
// Redis round trip through the store, then a ZeroMQ ROUTER/DEALER round trip of protocol messages
// over loopback TCP, and reports what CUDA the node offers. Exit code 0 when every check passed:
// what a Slurm prolog or a Kubernetes init container runs before a node joins a farm.
#include "cli/selftest_cmd.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>

#include "cli/version_cmd.h"
#include "shared/fatal.h"
#include "shared/local_redis.h"
#include "shared/protocol.h"
#include "shared/redis_client.h"
#include "shared/redis_store.h"
#include "shared/transport.h"

namespace kiln::cli {
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

Status redis_check(const std::string& dir, std::string* report) {
  auto t0 = Clock::now();
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<LocalRedis> server, LocalRedis::start({dir, false, "", 5000}));
  redis::RedisOptions options;
  options.url = server->url();
  KILN_ASSIGN_OR_RETURN(redis::RedisClient client, redis::RedisClient::connect(options));
  redis::Store store(client);
  KILN_RETURN_IF_ERROR(store.init_schema());
  const std::string text = "extern \"C\" __global__ void k() {}  // selftest " + std::to_string(getpid());
  KILN_ASSIGN_OR_RETURN(std::string hash, store.put_source(text));
  KILN_ASSIGN_OR_RETURN(std::optional<std::string> back, store.get_source(hash));
  if (!back || *back != text) return data_loss("the source read back differs from the one written");
  KILN_ASSIGN_OR_RETURN(redis::Reply info, client.command({"INFO", "server"}));
  std::string version = "?";
  if (size_t p = info.str.find("redis_version:"); p != std::string::npos) {
    version = info.str.substr(p + 14, info.str.find('\r', p) - p - 14);
  }
  *report = "redis-server " + version + " (" + server->server_path() + ") on " +
            server->socket_path() + ": write/read round trip in " +
            std::to_string(static_cast<int>(ms_since(t0))) + " ms";
  return Status::ok();
}

Status zmq_check(std::string* report) {
  auto t0 = Clock::now();
  zmq::context_t context(1);
  net::SocketOptions options;
  KILN_ASSIGN_OR_RETURN(net::RouterSocket router, net::RouterSocket::bind(context, "tcp://127.0.0.1:*", options));
  KILN_ASSIGN_OR_RETURN(net::DealerSocket dealer, net::DealerSocket::connect(context, router.last_endpoint(), options));
  proto::IdGenerator ids("selftest");
  proto::Hello hello;
  hello.role = std::string(proto::kRoleEvaluator);
  hello.worker_id = "selftest-" + std::to_string(getpid());
  hello.backends = {"cpu"};
  KILN_RETURN_IF_ERROR(dealer.send(proto::encode({proto::kProtocolVersion, ids.next(), hello})));
  KILN_ASSIGN_OR_RETURN(std::optional<net::RoutedMessage> got, router.receive(5000));
  if (!got) return deadline_exceeded("the ROUTER received nothing within 5 s");
  KILN_ASSIGN_OR_RETURN(proto::Envelope env, proto::decode(got->payload));
  if (!std::holds_alternative<proto::Hello>(env.body) ||
      std::get<proto::Hello>(env.body).worker_id != hello.worker_id) {
    return data_loss("the ROUTER decoded a different message than the DEALER sent");
  }
  KILN_RETURN_IF_ERROR(router.send(got->peer, proto::encode({proto::kProtocolVersion, ids.next(), proto::Heartbeat{}})));
  KILN_ASSIGN_OR_RETURN(std::optional<std::string> reply, dealer.receive(5000));
  if (!reply) return deadline_exceeded("the DEALER received no reply within 5 s");
  KILN_ASSIGN_OR_RETURN(proto::Envelope back, proto::decode(*reply));
  if (!std::holds_alternative<proto::Heartbeat>(back.body)) {
    return data_loss("the DEALER decoded a different reply than the ROUTER sent");
  }
  *report = "ROUTER " + router.last_endpoint() + " <-> DEALER: hello and heartbeat round trip in " +
            std::to_string(static_cast<int>(ms_since(t0))) + " ms";
  return Status::ok();
}

int run_selftest(const std::string& dir_arg) {
  std::string dir = dir_arg;
  bool remove_dir = false;
  if (dir.empty()) {
    char tmpl[] = "/tmp/kiln-selftest-XXXXXX";
    if (!mkdtemp(tmpl)) {
      report_fatal("kiln selftest: cannot create a temporary directory in /tmp");
      return 1;
    }
    dir = tmpl;
    remove_dir = true;
  }
  std::fputs(version_report(false).c_str(), stdout);
  int failures = 0;
  std::string report;
  Status s = redis_check(dir + "/redis", &report);
  std::printf("redis: %s\n", s.is_ok() ? ("ok -- " + report).c_str() : ("FAILED -- " + s.to_string()).c_str());
  failures += !s.is_ok();
  s = zmq_check(&report);
  std::printf("zeromq: %s\n", s.is_ok() ? ("ok -- " + report).c_str() : ("FAILED -- " + s.to_string()).c_str());
  failures += !s.is_ok();
  if (remove_dir) {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
  std::printf("selftest: %s\n", failures == 0 ? "all checks passed" : "FAILED");
  return failures == 0 ? 0 : 1;
}

}  // namespace

void add_selftest_command(CLI::App& app, std::function<int()>& action) {
  auto dir = std::make_shared<std::string>();
  CLI::App* sub = app.add_subcommand(
      "selftest",
      "Check this node: start a private redis-server (the bundled one when present) and do a Redis\n"
      "round trip, do a ZeroMQ round trip of protocol messages over loopback, report CUDA/GPUs.");
  sub->add_option("--dir", *dir, "Working folder for the private redis-server (default: a temp dir)");
  sub->callback([&action, dir] { action = [dir] { return run_selftest(*dir); }; });
}

}  // namespace kiln::cli
