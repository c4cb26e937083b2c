// RedisClient: a move-only, synchronous connection to Redis (hiredis) with authentication,
// reconnection with back-off, pipelines, MULTI/EXEC and cached Lua scripts. Replies are owned
// values (Reply); every failure is a Status with the command as context.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "shared/redis_url.h"
#include "shared/status.h"

struct redisContext;  // hiredis

namespace kiln::redis {

enum class ReplyKind { kNil, kString, kInteger, kArray, kStatus, kError };

// An owned copy of a RESP2 reply. `str` holds the bytes of a string, status or error reply.
struct Reply {
  ReplyKind kind = ReplyKind::kNil;
  std::string str;
  long long integer = 0;
  std::vector<Reply> elements;

  bool is_nil() const { return kind == ReplyKind::kNil; }
  bool is_string() const { return kind == ReplyKind::kString; }
  bool is_integer() const { return kind == ReplyKind::kInteger; }
  bool is_array() const { return kind == ReplyKind::kArray; }
  bool is_status() const { return kind == ReplyKind::kStatus; }
  bool is_error() const { return kind == ReplyKind::kError; }

  // The bytes of a string or status reply.
  Result<std::string> as_string() const;
  // nullopt for nil, else as_string().
  Result<std::optional<std::string>> as_optional_string() const;
  // An integer reply, or a string reply holding a decimal integer (GET of a counter).
  Result<long long> as_integer() const;
};

// The Status for a Redis error reply text such as "WRONGTYPE Operation against a key...":
// "ERR ..." (bad syntax, arity, values) -> kInvalidArgument; LOADING, BUSY, MASTERDOWN, TRYAGAIN,
// CLUSTERDOWN (the server cannot serve now) -> kUnavailable; anything else (WRONGTYPE, NOSCRIPT,
// NOAUTH, WRONGPASS, NOPERM, EXECABORT, READONLY, ...) -> kFailedPrecondition.
Status error_reply_status(std::string_view error_text);
// OK unless `reply` is an error reply (use it on pipeline and transaction elements).
Status check_reply(const Reply& reply);

struct ContextDeleter {
  void operator()(redisContext* context) const;
};

// Not thread-safe: use one client per thread (or guard it). Failure codes:
//  kUnavailable       - cannot connect, or the connection was lost (the command may have run);
//  kDeadlineExceeded  - no reply within command_timeout_ms; the command may still run on the
//                       server; the connection is dropped and the next call reconnects;
//  others             - the server's error reply, mapped by error_reply_status.
class RedisClient {
 public:
  // Connects once (no retry), then AUTHs and SELECTs as configured; when neither is needed it
  // sends PING so that a server requiring a password fails here with a clear message.
  static Result<RedisClient> connect(const RedisOptions& options);

  RedisClient(RedisClient&&) noexcept;
  RedisClient& operator=(RedisClient&&) noexcept;
  RedisClient(const RedisClient&) = delete;
  RedisClient& operator=(const RedisClient&) = delete;
  ~RedisClient();

  // Runs one command (binary-safe arguments). If the connection is lost the client reconnects
  // (with back-off) and returns kUnavailable without retrying, because the command may already
  // have been applied; the next call uses the new connection.
  Result<Reply> command(const std::vector<std::string>& args);
  // As command(), but after reconnecting it retries once: only for commands that are safe to run
  // twice (GET, SET without NX, HSET, ZADD, DEL, ...). A timeout is never retried.
  Result<Reply> command_idempotent(const std::vector<std::string>& args);

  // Sends all commands, then reads all replies (one round trip). Error replies come back as
  // elements (check_reply); the Status is non-OK only when the exchange itself failed, in which
  // case an unknown prefix of the commands ran. Never retried.
  Result<std::vector<Reply>> pipeline(const std::vector<std::vector<std::string>>& commands);

  // MULTI, commands, EXEC in one round trip; returns EXEC's replies (runtime errors such as
  // WRONGTYPE are elements: Redis applies the other commands and does not roll back). A command
  // rejected while queueing makes the whole transaction fail (EXECABORT, nothing applied). If a
  // WATCHed key changed, EXEC returns nil and this returns kFailedPrecondition with the exact
  // message "transaction aborted". Hazard: a reconnect drops WATCHes silently.
  Result<std::vector<Reply>> transaction(const std::vector<std::vector<std::string>>& commands);

  // Runs a Lua script by EVALSHA (SHA-1 cached per client), falling back to EVAL on NOSCRIPT
  // (first use, server restart, SCRIPT FLUSH). Retried after a lost connection only when the
  // caller says running it twice does no harm (`idempotent`).
  Result<Reply> eval(const std::string& script, const std::vector<std::string>& keys,
                     const std::vector<std::string>& args, bool idempotent = false);

  Status ping();

  // False after a failed reconnect or a timeout, until the next call reconnects.
  bool connected() const { return context_ != nullptr; }
  // Exchanges with the server that failed (connection lost, timeout) since this client was made:
  // kiln_redis_errors_total on the coordinator's /metrics.
  uint64_t failures() const { return failures_; }
  // Where this client connects, without credentials (for messages).
  std::string describe() const { return endpoint_.describe(); }

 private:
  RedisClient(RedisOptions options, RedisEndpoint endpoint);

  // One exchange. Error replies are returned as Reply values; a non-OK Status means the
  // connection failed (kUnavailable) or timed out (kDeadlineExceeded) and has been dropped.
  Result<Reply> send(const std::vector<std::string>& args);
  Result<std::vector<Reply>> send_pipeline(const std::vector<std::vector<std::string>>& commands);
  // Opens a fresh connection, retrying with back-off; stops early on non-transient failures.
  Status reconnect();

 public:
  // Reconnects when the connection is gone (with the options' retry); OK when connected.
  Status ensure_connected() { return context_ ? Status::ok() : reconnect(); }

 private:
  // command()/command_idempotent() without converting error replies to a Status.
  Result<Reply> round_trip(const std::vector<std::string>& args, bool idempotent);
  const std::string& script_sha1(const std::string& script);

  RedisOptions options_;
  RedisEndpoint endpoint_;
  std::unique_ptr<redisContext, ContextDeleter> context_;
  std::unordered_map<std::string, std::string> script_sha1_;  // script text -> hex SHA-1
  uint64_t failures_ = 0;
};

}  // namespace kiln::redis
