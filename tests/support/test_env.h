// Test support: temporary directories and a real redis-server on a private unix socket.
#pragma once

#include <sys/types.h>

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "shared/local_redis.h"
#include "shared/redis_client.h"
#include "shared/redis_store.h"
#include "shared/status.h"
#include "shared/target_spec.h"

namespace kiln::testing {

// A fresh directory under $TMPDIR (or /tmp), removed with its contents on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }
  // Writes `content` to path()/name and returns the full path.
  std::string write(const std::string& name, const std::string& content) const;

 private:
  std::string path_;
};

// A LocalRedis (shared/local_redis.h) in a temporary directory: a real redis-server on a unix
// socket, stopped on destruction.
// Optional `extra_config` lines are appended to its config (e.g. "requirepass s3cret").
class RedisServer {
 public:
  explicit RedisServer(const std::string& extra_config = "");
  ~RedisServer();
  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;

  bool started() const { return redis_ != nullptr && redis_->pid() > 0; }
  const std::string& error() const { return error_; }  // why it did not start
  const std::string& socket_path() const { return socket_; }
  pid_t pid() const { return redis_ ? redis_->pid() : -1; }
  void kill_now() { if (redis_) redis_->kill_now(); }  // SIGKILL, for fault tests

 private:
  TempDir dir_;
  std::string socket_;
  std::string error_;
  std::unique_ptr<LocalRedis> redis_;
};

// Connects `client` to `server` and puts on it a `store` whose schema is initialised: where the
// coordinator's and agents' tests start. Returns "" when ready, else why not (tests assert on it).
std::string connect_store(const RedisServer& server, std::optional<redis::RedisClient>* client,
                          std::optional<redis::Store>* store);

// Path to the built `kiln` binary.
std::string kiln_binary();

// The folder holding tests/ and targets/: $KILN_SOURCE_DIR when set (a bundle unpacked on a GPU
// machine, away from the build tree), else the source tree the binary was built from.
std::string source_root();

// The built-in targets' folder (source_root()/targets), and one built-in target loaded from it.
std::string builtin_targets_dir();
Result<TargetSpec> load_builtin_target(const std::string& name);
// Copies built-in target `name` into `targets_dir`/`name` and lets `edit` change its target.json
// (a smaller benchmark shape, a constraint) before it is written back.
void copy_builtin_target(const std::string& name, const std::string& targets_dir,
                         const std::function<void(nlohmann::json&)>& edit);

// A cpu farm of two GPU models: `kiln coordinator --bind tcp://127.0.0.1:* --backend cpu
// <coordinator_args> --out <dir>/coord` (built-in targets) and two `kiln evaluator` processes that
// announce the models "Model Alpha" (worker eval-alpha) and "beta" (eval-beta); runs until the
// coordinator ends and returns everything printed, with "rc=<its exit code>" and its log.
std::string run_two_model_farm(const TempDir& dir, const std::string& coordinator_args);

// Runs a shell command, returns its exit status and fills `output` with stdout+stderr.
int run_command(const std::string& command, std::string* output);

// "" when `json_text` (a /status document) matches docs/status.schema.json, else what
// python3-jsonschema says (scripts/bootstrap installs it).
std::string status_schema_problem(const std::string& json_text);

// A file's whole content ("" when it cannot be read).
std::string read_file(const std::string& path);

// A JSON file parsed (a discarded value when it is missing or not JSON).
nlohmann::json read_json(const std::string& path);

// A loopback TCP port that was free a moment ago (-1 when none could be had).
int free_tcp_port();

}  // namespace kiln::testing
