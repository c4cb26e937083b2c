#include "cli/run_lease.h"

#include <unistd.h>

#include <cstdio>
#include <random>
#include <sstream>
#include <thread>

#include "cli/run_support.h"
#include "shared/redis_keys.h"
#include "shared/text.h"

namespace kiln::cli {
namespace {

// Renews the lease if it is still `holder`'s, or takes it again if it expired: 1 or 2; 0 when
// another holds it.
constexpr const char* kRenewScript =
    "local v = redis.call('get', KEYS[1]) "
    "if v == ARGV[1] then redis.call('pexpire', KEYS[1], ARGV[2]) return 1 end "
    "if not v then redis.call('set', KEYS[1], ARGV[1], 'PX', ARGV[2]) return 2 end "
    "return 0";
constexpr const char* kReleaseScript =
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end "
    "return 0";

std::string host_name() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0 || name[0] == '\0') return "unknown-host";
  return name;
}

struct Holder {
  std::string host;
  pid_t pid = -1;
};

Holder parse_holder(const std::string& value) {
  Holder h;
  std::istringstream in(value);
  long long pid = -1;
  in >> h.host >> pid;
  h.pid = static_cast<pid_t>(pid);
  return h;
}

std::string ttl_ms() { return std::to_string(RunLease::kTtl.count()); }

}  // namespace

Result<RunLease> RunLease::acquire(redis::RedisClient& client, const std::string& who) {
  std::random_device random;
  const std::string me = host_name();
  const std::string holder = me + " " + std::to_string(getpid()) + " " + std::to_string(random()) +
                             std::to_string(random());
  const auto deadline = std::chrono::steady_clock::now() + kTtl + std::chrono::seconds(1);
  bool said = false;
  while (true) {
    Result<redis::Reply> set =
        client.command({"SET", redis::keys::lease(), holder, "NX", "PX", ttl_ms()});
    if (!set.is_ok()) return set.status().with_context("taking the run's lease in Redis");
    if (set->kind == redis::ReplyKind::kStatus) return RunLease(client, holder);
    Result<redis::Reply> held = client.command({"GET", redis::keys::lease()});
    if (!held.is_ok()) return held.status().with_context("reading the run's lease in Redis");
    if (held->kind != redis::ReplyKind::kString) continue;  // it expired in between
    const Holder h = parse_holder(held->str);
    const std::string named = "host " + log_safe(h.host, 80) + ", pid " + std::to_string(h.pid);
    if (h.host == me && h.pid > 0 && h.pid != getpid()) {
      if (!process_alive(h.pid)) {  // killed on this host and started again: take it over
        Result<redis::Reply> taken =
            client.command({"SET", redis::keys::lease(), holder, "PX", ttl_ms()});
        if (!taken.is_ok()) return taken.status().with_context("taking the run's lease in Redis");
        return RunLease(client, holder);
      }
    }
    const bool alive_here = h.host == me && process_alive(h.pid);
    if (alive_here || std::chrono::steady_clock::now() > deadline) {
      return failed_precondition(
          "another coordinator is running this Redis's run (" + named +
          "): stop it first, or give this one a Redis of its own; two coordinators on one run "
          "would each hand out its tasks");
    }
    if (!said) {
      std::fprintf(stderr,
                   "%s: the run's lease is held by a coordinator on %s; waiting up to %lld s for "
                   "it to lapse (a coordinator that died stops renewing it)\n",
                   who.c_str(), named.c_str(), static_cast<long long>(kTtl.count() / 1000));
      said = true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
}

RunLease::RunLease(redis::RedisClient& client, std::string holder)
    : client_(&client), holder_(std::move(holder)), renewed_(std::chrono::steady_clock::now()) {}

RunLease::RunLease(RunLease&& other) noexcept
    : client_(other.client_), holder_(std::move(other.holder_)), renewed_(other.renewed_) {
  other.holder_.clear();
}

void RunLease::release() {
  if (holder_.empty()) return;
  (void)client_->command({"EVAL", kReleaseScript, "1", redis::keys::lease(), holder_});
  holder_.clear();
}

Status RunLease::renew() {
  if (holder_.empty()) return Status::ok();
  const auto now = std::chrono::steady_clock::now();
  if (now - renewed_ < kRenewEvery) return Status::ok();
  Result<redis::Reply> r =
      client_->command({"EVAL", kRenewScript, "1", redis::keys::lease(), holder_, ttl_ms()});
  if (!r.is_ok() || r->kind != redis::ReplyKind::kInteger) return Status::ok();
  renewed_ = now;
  if (r->integer != 0) return Status::ok();
  Result<redis::Reply> held = client_->command({"GET", redis::keys::lease()});
  const Holder h = parse_holder(held.is_ok() ? held->str : "");
  return failed_precondition("another coordinator took over this run (host " +
                             log_safe(h.host, 80) + ", pid " + std::to_string(h.pid) +
                             ") while this one was stalled; this one stops");
}

}  // namespace kiln::cli
