// A private redis-server on a unix socket in a folder of kiln's (for `kiln run` without --redis,
// `kiln selftest` and tests): started from $KILN_REDIS_SERVER, beside the kiln binary (bundles) or
// PATH, listening on no TCP port, stopped (SIGTERM, then SIGKILL) when the object goes away.
#pragma once

#include <sys/types.h>

#include <memory>
#include <optional>
#include <string>

#include "shared/child_process.h"
#include "shared/status.h"

namespace kiln {

struct LocalRedisOptions {
  std::string dir;            // holds redis.sock, redis.conf, redis.log and the data files
  bool persist = false;       // AOF on (appendfsync everysec), for runs that must survive restarts
  std::string extra_config;   // more redis.conf lines (e.g. "requirepass s3cret")
  uint32_t start_timeout_ms = 5000;
};

class LocalRedis {
 public:
  static Result<std::unique_ptr<LocalRedis>> start(const LocalRedisOptions& options);
  ~LocalRedis();
  LocalRedis(const LocalRedis&) = delete;
  LocalRedis& operator=(const LocalRedis&) = delete;

  const std::string& socket_path() const { return socket_; }
  std::string url() const { return "unix://" + socket_; }
  pid_t pid() const { return child_ ? child_->pid() : -1; }
  const std::string& server_path() const { return server_; }
  void kill_now();  // SIGKILL, for fault tests
  // The last lines (about 2 KB) of its log.
  std::string log_tail() const;
  // Whether this server loaded an AOF whose end was cut short (Redis loads what is before the
  // cut: a crash leaves exactly that, a file damaged deep down loses most of what it held).
  bool loaded_truncated_aof() const;

 private:
  LocalRedis() = default;
  std::string dir_, socket_, server_;
  std::optional<ChildProcess> child_;
};

// The redis-server executable kiln would start.
std::string find_redis_server();

}  // namespace kiln
