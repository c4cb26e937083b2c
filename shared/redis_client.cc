// RedisClient implementation over hiredis' blocking API. Only calls present in both hiredis 0.14
// and 1.x are used, and the connection speaks RESP2 (no HELLO 3), so RESP3 reply types never occur.
#include "shared/redis_client.h"

#include <hiredis/hiredis.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <spdlog/spdlog.h>
#include <sys/time.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <csignal>
#include <cstring>
#include <ctime>
#include <thread>

namespace kiln::redis {

namespace {

struct ReplyDeleter {
  void operator()(redisReply* reply) const { freeReplyObject(reply); }
};
using ReplyPtr = std::unique_ptr<redisReply, ReplyDeleter>;
using ContextPtr = std::unique_ptr<redisContext, ContextDeleter>;

timeval to_timeval(int ms) {
  timeval tv{};
  tv.tv_sec = ms / 1000;
  tv.tv_usec = static_cast<suseconds_t>(ms % 1000) * 1000;
  return tv;
}

// hiredis writes with send()/write() without MSG_NOSIGNAL, so writing to a connection the server
// closed raises SIGPIPE, whose default action kills the process. This blocks SIGPIPE for the
// calling thread during one hiredis call and discards a SIGPIPE that the call raised (the call
// reports EPIPE as an error anyway), without changing process-wide signal dispositions.
class ScopedSigpipeBlock {
 public:
  ScopedSigpipeBlock() {
    sigset_t pending;
    sigemptyset(&pending);
    sigpending(&pending);
    was_pending_ = sigismember(&pending, SIGPIPE) == 1;
    sigset_t block;
    sigemptyset(&block);
    sigaddset(&block, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &block, &previous_);
  }
  ~ScopedSigpipeBlock() {
    int saved_errno = errno;
    if (!was_pending_) {
      sigset_t pending;
      sigemptyset(&pending);
      sigpending(&pending);
      if (sigismember(&pending, SIGPIPE) == 1) {
        sigset_t pipe_only;
        sigemptyset(&pipe_only);
        sigaddset(&pipe_only, SIGPIPE);
        timespec zero{};
        while (sigtimedwait(&pipe_only, nullptr, &zero) == -1 && errno == EINTR) {
        }
      }
    }
    pthread_sigmask(SIG_SETMASK, &previous_, nullptr);
    errno = saved_errno;
  }
  ScopedSigpipeBlock(const ScopedSigpipeBlock&) = delete;
  ScopedSigpipeBlock& operator=(const ScopedSigpipeBlock&) = delete;

 private:
  sigset_t previous_{};
  bool was_pending_ = false;
};

// argv/argvlen arrays pointing into `args` (which must outlive this), for binary-safe commands.
struct ArgvView {
  explicit ArgvView(const std::vector<std::string>& args) {
    for (const std::string& arg : args) {
      argv.push_back(arg.data());
      lengths.push_back(arg.size());
    }
  }
  int argc() const { return static_cast<int>(argv.size()); }
  std::vector<const char*> argv;
  std::vector<size_t> lengths;
};

Reply convert(const redisReply* raw) {
  Reply reply;
  switch (raw->type) {
    case REDIS_REPLY_STRING:
      reply.kind = ReplyKind::kString;
      break;
    case REDIS_REPLY_STATUS:
      reply.kind = ReplyKind::kStatus;
      break;
    case REDIS_REPLY_ERROR:
      reply.kind = ReplyKind::kError;
      break;
    case REDIS_REPLY_INTEGER:
      reply.kind = ReplyKind::kInteger;
      break;
    case REDIS_REPLY_NIL:
      reply.kind = ReplyKind::kNil;
      break;
    case REDIS_REPLY_ARRAY:
      reply.kind = ReplyKind::kArray;
      break;
    default:  // RESP3 types; unreachable while the connection speaks RESP2
      reply.kind = ReplyKind::kError;
      reply.str = "ERR unsupported reply type " + std::to_string(raw->type);
      return reply;
  }
  if (reply.kind == ReplyKind::kInteger) reply.integer = raw->integer;
  if (raw->str != nullptr &&
      (reply.kind == ReplyKind::kString || reply.kind == ReplyKind::kStatus ||
       reply.kind == ReplyKind::kError)) {
    reply.str.assign(raw->str, raw->len);
  }
  if (reply.kind == ReplyKind::kArray) {
    reply.elements.reserve(raw->elements);
    for (size_t i = 0; i < raw->elements; ++i) reply.elements.push_back(convert(raw->element[i]));
  }
  return reply;
}

// Status for a failed hiredis call on `context`; `saved_errno` is errno right after the call.
// A receive timeout shows up as an I/O error with EAGAIN (SO_RCVTIMEO), or REDIS_ERR_TIMEOUT in
// hiredis >= 1.0.
Status io_failure(const redisContext* context, int saved_errno, int timeout_ms) {
  if (context->err == 0) return unavailable("redis I/O failed without an error (out of memory?)");
  bool timed_out =
      context->err == REDIS_ERR_IO && (saved_errno == EAGAIN || saved_errno == EWOULDBLOCK ||
                                       std::strcmp(context->errstr, std::strerror(EAGAIN)) == 0);
#ifdef REDIS_ERR_TIMEOUT
  timed_out = timed_out || context->err == REDIS_ERR_TIMEOUT;
#endif
  if (timed_out) {
    return deadline_exceeded("no reply within " + std::to_string(timeout_ms) +
                             " ms (the command may still run on the server)");
  }
  return unavailable(std::string("connection lost (") + context->errstr + ")");
}

Result<Reply> exchange(redisContext* context, const std::vector<std::string>& args,
                       int timeout_ms) {
  ArgvView view(args);
  void* raw = nullptr;
  int saved_errno = 0;
  {
    ScopedSigpipeBlock block;
    errno = 0;
    raw = redisCommandArgv(context, view.argc(), view.argv.data(), view.lengths.data());
    saved_errno = errno;
  }
  if (raw == nullptr) return io_failure(context, saved_errno, timeout_ms);
  ReplyPtr owned(static_cast<redisReply*>(raw));
  return convert(owned.get());
}

Result<std::vector<Reply>> exchange_pipeline(redisContext* context,
                                             const std::vector<std::vector<std::string>>& commands,
                                             int timeout_ms) {
  ScopedSigpipeBlock block;
  for (const std::vector<std::string>& args : commands) {
    ArgvView view(args);
    // Appending only buffers (it fails only without memory); the writes happen in redisGetReply.
    if (redisAppendCommandArgv(context, view.argc(), view.argv.data(), view.lengths.data()) !=
        REDIS_OK) {
      return io_failure(context, errno, timeout_ms);
    }
  }
  std::vector<Reply> replies;
  replies.reserve(commands.size());
  for (size_t i = 0; i < commands.size(); ++i) {
    void* raw = nullptr;
    errno = 0;
    int rc = redisGetReply(context, &raw);
    int saved_errno = errno;
    if (rc != REDIS_OK || raw == nullptr) {
      return io_failure(context, saved_errno, timeout_ms)
          .with_context("after " + std::to_string(i) + " of " + std::to_string(commands.size()) +
                        " replies");
    }
    ReplyPtr owned(static_cast<redisReply*>(raw));
    replies.push_back(convert(owned.get()));
  }
  return replies;
}

// "redis GET kiln:target:x" for messages: the command and its first argument, printable and
// truncated; never the arguments of AUTH/HELLO (credentials).
std::string describe_command(const std::vector<std::string>& args) {
  std::string out = "redis";
  std::string name = args.empty() ? "" : args[0];
  for (char& c : name) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  bool secret_arguments = name == "AUTH" || name == "HELLO";
  for (size_t i = 0; i < std::min<size_t>(args.size(), secret_arguments ? 1 : 2); ++i) {
    out += ' ';
    for (unsigned char c : args[i].substr(0, 80)) out += (c < 0x20 || c >= 0x7f) ? '?' : c;
    if (args[i].size() > 80) out += "...";
  }
  return out;
}

Result<Reply> finish(Result<Reply> reply, std::string_view what) {
  if (!reply.is_ok()) return reply.status().with_context(what);
  if (reply->is_error()) return error_reply_status(reply->str).with_context(what);
  return reply;
}

// Connects and runs the handshake: AUTH, SELECT, or PING when neither is needed.
Result<ContextPtr> open_connection(const RedisOptions& options, const RedisEndpoint& endpoint) {
  std::string where = "connecting to " + endpoint.describe();
  timeval connect_timeout = to_timeval(options.connect_timeout_ms);
  ContextPtr context(
      endpoint.unix_path.empty()
          ? redisConnectWithTimeout(endpoint.host.c_str(), endpoint.port, connect_timeout)
          : redisConnectUnixWithTimeout(endpoint.unix_path.c_str(), connect_timeout));
  if (context == nullptr) return unavailable(where + ": hiredis could not allocate a context");
  if (context->err != 0) return unavailable(where + ": " + context->errstr);
  if (redisSetTimeout(context.get(), to_timeval(options.command_timeout_ms)) != REDIS_OK) {
    return unavailable(where + ": setting the command timeout: " + context->errstr);
  }
  int timeout_ms = options.command_timeout_ms;
  if (!options.password.empty()) {
    std::vector<std::string> auth = {"AUTH"};
    if (!options.username.empty()) auth.push_back(options.username);
    auth.push_back(options.password);
    std::string who =
        options.username.empty() ? "the default user" : "user '" + options.username + "'";
    KILN_ASSIGN_OR_RETURN(
        Reply reply, finish(exchange(context.get(), auth, timeout_ms), where + ": AUTH as " + who));
  }
  if (options.db != 0) {
    KILN_ASSIGN_OR_RETURN(
        Reply reply,
        finish(exchange(context.get(), {"SELECT", std::to_string(options.db)}, timeout_ms),
               where + ": SELECT " + std::to_string(options.db)));
  }
  if (options.password.empty() && options.db == 0) {
    Result<Reply> pong = exchange(context.get(), {"PING"}, timeout_ms);
    if (pong.is_ok() && pong->is_error() && pong->str.rfind("NOAUTH", 0) == 0) {
      return failed_precondition(where + ": the server requires a password (" + pong->str +
                                 "); set it in RedisOptions or the URL (redis://:password@host)");
    }
    KILN_ASSIGN_OR_RETURN(Reply reply, finish(std::move(pong), where + ": PING"));
  }
  return context;
}

}  // namespace

Result<std::string> Reply::as_string() const {
  if (kind == ReplyKind::kString || kind == ReplyKind::kStatus) return str;
  if (kind == ReplyKind::kError) return error_reply_status(str);
  return failed_precondition("redis reply: expected a string");
}

Result<std::optional<std::string>> Reply::as_optional_string() const {
  if (kind == ReplyKind::kNil) return std::optional<std::string>();
  KILN_ASSIGN_OR_RETURN(std::string value, as_string());
  return std::optional<std::string>(std::move(value));
}

Result<long long> Reply::as_integer() const {
  if (kind == ReplyKind::kInteger) return integer;
  if (kind == ReplyKind::kError) return error_reply_status(str);
  if (kind == ReplyKind::kString) {
    long long value = 0;
    auto [ptr, ec] = std::from_chars(str.data(), str.data() + str.size(), value);
    if (!str.empty() && ec == std::errc() && ptr == str.data() + str.size()) return value;
  }
  return failed_precondition("redis reply: expected an integer");
}

Status error_reply_status(std::string_view error_text) {
  std::string_view code = error_text.substr(0, error_text.find(' '));
  std::string message(error_text);
  if (code == "ERR") return invalid_argument(message);
  if (code == "LOADING" || code == "BUSY" || code == "MASTERDOWN" || code == "TRYAGAIN" ||
      code == "CLUSTERDOWN") {
    return unavailable(message);
  }
  return failed_precondition(message);
}

Status check_reply(const Reply& reply) {
  return reply.is_error() ? error_reply_status(reply.str) : Status::ok();
}

void ContextDeleter::operator()(redisContext* context) const { redisFree(context); }

RedisClient::RedisClient(RedisOptions options, RedisEndpoint endpoint)
    : options_(std::move(options)), endpoint_(std::move(endpoint)) {}
RedisClient::RedisClient(RedisClient&&) noexcept = default;
RedisClient& RedisClient::operator=(RedisClient&&) noexcept = default;
RedisClient::~RedisClient() = default;

Result<RedisClient> RedisClient::connect(const RedisOptions& options) {
  KILN_ASSIGN_OR_RETURN(RedisEndpoint endpoint, parse_redis_endpoint(options.url));
  RedisOptions resolved = options;
  if (resolved.username.empty()) resolved.username = endpoint.username;
  if (resolved.password.empty()) resolved.password = endpoint.password;
  if (resolved.db == 0) resolved.db = endpoint.db;
  endpoint.username = resolved.username;
  endpoint.password = resolved.password;
  endpoint.db = resolved.db;
  if (!resolved.username.empty() && resolved.password.empty()) {
    return invalid_argument(
        "redis: user '" + resolved.username +
        "' given without a password; put it in the URL (redis://user:password@host) or, "
        "to keep it off the command line, in a file named by --redis-password-file");
  }
  if (resolved.connect_timeout_ms <= 0 || resolved.command_timeout_ms <= 0 || resolved.db < 0 ||
      resolved.reconnect_backoff_initial_ms < 0 || resolved.reconnect_backoff_max_ms < 0) {
    return invalid_argument("redis: timeouts must be positive and back-off and db non-negative");
  }
  KILN_ASSIGN_OR_RETURN(ContextPtr context, open_connection(resolved, endpoint));
  RedisClient client(std::move(resolved), std::move(endpoint));
  client.context_ = std::move(context);
  return client;
}

Status RedisClient::reconnect() {
  context_.reset();
  const int attempts = std::max(1, options_.max_reconnect_attempts);
  const auto give_up =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(options_.reconnect_for_ms);
  int wait_ms = options_.reconnect_backoff_initial_ms;
  Status last;
  int attempt = 0;
  bool warned = false;
  // At least `attempts` tries, and with reconnect_for_ms, on until that much time has passed.
  while (attempt < attempts || std::chrono::steady_clock::now() < give_up) {
    if (attempt++ > 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(wait_ms));
      wait_ms = std::min(wait_ms * 2, options_.reconnect_backoff_max_ms);
    }
    Result<ContextPtr> opened = open_connection(options_, endpoint_);
    if (opened.is_ok()) {
      context_ = std::move(opened).value();
      if (warned) spdlog::info("redis at {} is back after {} attempts", describe(), attempt);
      return Status::ok();
    }
    last = opened.status();
    // A wrong password or a bad db does not heal by waiting.
    if (last.code() != StatusCode::kUnavailable) return last;
    if (!warned && options_.reconnect_for_ms > 0) {
      spdlog::warn("redis at {} is unreachable ({}); retrying for up to {} s", describe(),
                   last.message(), options_.reconnect_for_ms / 1000);
      warned = true;
    }
  }
  return Status(last.code(),
                "reconnect failed after " + std::to_string(attempt) + " attempts" +
                    (options_.reconnect_for_ms > 0
                         ? " over " + std::to_string(options_.reconnect_for_ms / 1000) + " s"
                         : "") +
                    ": " + last.message());
}

Result<Reply> RedisClient::send(const std::vector<std::string>& args) {
  Result<Reply> reply = exchange(context_.get(), args, options_.command_timeout_ms);
  if (!reply.is_ok()) {
    context_.reset();  // the stream is out of step (or dead): never reuse it
    ++failures_;
  }
  return reply;
}

Result<std::vector<Reply>> RedisClient::send_pipeline(
    const std::vector<std::vector<std::string>>& commands) {
  for (const std::vector<std::string>& args : commands) {
    if (args.empty()) return invalid_argument("redis pipeline: empty command");
  }
  if (!context_) KILN_RETURN_IF_ERROR(reconnect());
  Result<std::vector<Reply>> replies =
      exchange_pipeline(context_.get(), commands, options_.command_timeout_ms);
  if (replies.is_ok()) return replies;
  context_.reset();
  ++failures_;
  Status failed = replies.status();
  if (failed.code() != StatusCode::kUnavailable) return failed;
  Status reconnected = reconnect();
  return Status(reconnected.is_ok() ? failed.code() : reconnected.code(),
                failed.message() + (reconnected.is_ok()
                                        ? "; reconnected, not retried (some commands may have run)"
                                        : "; " + reconnected.message()));
}

Result<Reply> RedisClient::round_trip(const std::vector<std::string>& args, bool idempotent) {
  if (args.empty()) return invalid_argument("empty command");
  if (!context_) KILN_RETURN_IF_ERROR(reconnect());
  Result<Reply> reply = send(args);
  if (reply.is_ok() || reply.status().code() != StatusCode::kUnavailable) return reply;
  Status lost = reply.status();
  Status reconnected = reconnect();
  if (!reconnected.is_ok())
    return Status(reconnected.code(), lost.message() + "; " + reconnected.message());
  if (!idempotent) {
    return unavailable(lost.message() +
                       "; reconnected, but did not retry the command because it may have run");
  }
  Result<Reply> retried = send(args);
  if (!retried.is_ok()) return retried.status().with_context("retrying after reconnect");
  return retried;
}

Result<Reply> RedisClient::command(const std::vector<std::string>& args) {
  return finish(round_trip(args, false), describe_command(args));
}

Result<Reply> RedisClient::command_idempotent(const std::vector<std::string>& args) {
  return finish(round_trip(args, true), describe_command(args));
}

Result<std::vector<Reply>> RedisClient::pipeline(
    const std::vector<std::vector<std::string>>& commands) {
  if (commands.empty()) return std::vector<Reply>();
  Result<std::vector<Reply>> replies = send_pipeline(commands);
  if (!replies.is_ok()) {
    return replies.status().with_context("redis pipeline of " + std::to_string(commands.size()) +
                                         " commands");
  }
  return replies;
}

Result<std::vector<Reply>> RedisClient::transaction(
    const std::vector<std::vector<std::string>>& commands) {
  if (commands.empty()) return std::vector<Reply>();
  std::string what = "redis MULTI/EXEC of " + std::to_string(commands.size()) + " commands";
  std::vector<std::vector<std::string>> all;
  all.reserve(commands.size() + 2);
  all.push_back({"MULTI"});
  all.insert(all.end(), commands.begin(), commands.end());
  all.push_back({"EXEC"});
  Result<std::vector<Reply>> replies = send_pipeline(all);
  if (!replies.is_ok()) return replies.status().with_context(what);
  KILN_RETURN_IF_ERROR(check_reply(replies->front()).with_context(what + ": MULTI"));
  Reply& exec = replies->back();
  if (exec.is_nil()) return failed_precondition("transaction aborted");  // callers match this text
  if (exec.is_error()) {
    // EXECABORT: a command was rejected while queueing; report the first rejection.
    for (size_t i = 1; i + 1 < replies->size(); ++i) {
      const Reply& queued = (*replies)[i];
      if (queued.is_error()) {
        return error_reply_status(queued.str)
            .with_context(what + ": " + describe_command(commands[i - 1]) + " (nothing applied)");
      }
    }
    return error_reply_status(exec.str).with_context(what + ": EXEC");
  }
  if (!exec.is_array()) return internal_error(what + ": EXEC returned neither an array nor nil");
  return std::move(exec.elements);
}

const std::string& RedisClient::script_sha1(const std::string& script) {
  auto found = script_sha1_.find(script);
  if (found != script_sha1_.end()) return found->second;
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int digest_bytes = 0;
  int ok = EVP_Digest(script.data(), script.size(), digest, &digest_bytes, EVP_sha1(), nullptr);
  KILN_CHECK(ok == 1, "EVP_Digest(SHA-1) failed");
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  for (unsigned int i = 0; i < digest_bytes; ++i) {
    hex += kHex[digest[i] >> 4];
    hex += kHex[digest[i] & 15];
  }
  return script_sha1_.emplace(script, std::move(hex)).first->second;
}

Result<Reply> RedisClient::eval(const std::string& script, const std::vector<std::string>& keys,
                                const std::vector<std::string>& args, bool idempotent) {
  const std::string& sha1 = script_sha1(script);
  std::vector<std::string> argv = {"EVALSHA", sha1, std::to_string(keys.size())};
  argv.insert(argv.end(), keys.begin(), keys.end());
  argv.insert(argv.end(), args.begin(), args.end());
  Result<Reply> reply = round_trip(argv, idempotent);
  if (reply.is_ok() && reply->is_error() && std::string_view(reply->str).starts_with("NOSCRIPT")) {
    argv[0] = "EVAL";
    argv[1] = script;  // EVAL also loads the script, so the next EVALSHA hits
    reply = round_trip(argv, idempotent);
  }
  return finish(std::move(reply), "redis EVAL script " + sha1.substr(0, 12));
}

Status RedisClient::ping() {
  KILN_ASSIGN_OR_RETURN(Reply reply, command_idempotent({"PING"}));
  if (!reply.is_status() || reply.str != "PONG") {
    return internal_error("redis PING at " + describe() + ": unexpected reply '" + reply.str + "'");
  }
  return Status::ok();
}

}  // namespace kiln::redis
