// Tests of RedisClient and URL parsing against a real redis-server on a private unix socket:
// binary safety, error mapping, pipelines, transactions, scripts, AUTH/ACL, reconnects, timeouts.
#include "shared/redis_client.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/test_env.h"

namespace kiln::redis {
namespace {

using Clock = std::chrono::steady_clock;
using kiln::testing::RedisServer;
using kiln::testing::TempDir;

#define KILN_SKIP_WITHOUT(server)                                                              \
  if (!(server).started()) GTEST_SKIP() << "redis-server did not start: " << (server).error()

RedisOptions options_for(const std::string& socket_path) {
  RedisOptions options;
  options.url = "unix://" + socket_path;
  options.connect_timeout_ms = 1000;
  options.command_timeout_ms = 2000;
  options.max_reconnect_attempts = 3;
  options.reconnect_backoff_initial_ms = 10;
  return options;
}

long long elapsed_ms(Clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
}

// Points the symlink `link` at `target` atomically, so a client sees one path across restarts.
void point_link(const std::string& link, const std::string& target) {
  std::string staging = link + ".new";
  ::unlink(staging.c_str());
  ASSERT_EQ(::symlink(target.c_str(), staging.c_str()), 0);
  ASSERT_EQ(std::rename(staging.c_str(), link.c_str()), 0);
}

TEST(RedisUrl, ParsesGoodUrls) {
  struct Case {
    std::string url, unix_path, host;
    int port, db;
    std::string username, password;
  };
  const std::vector<Case> cases = {
      {"unix:///tmp/r.sock", "/tmp/r.sock", "", 6379, 0, "", ""},
      {"unix:///tmp/r.sock?db=3", "/tmp/r.sock", "", 6379, 3, "", ""},
      {"redis://localhost", "", "localhost", 6379, 0, "", ""},
      {"redis://10.0.0.5:6380", "", "10.0.0.5", 6380, 0, "", ""},
      {"redis://host:6379/2", "", "host", 6379, 2, "", ""},
      {"redis://:s3cret@host:7000/", "", "host", 7000, 0, "", "s3cret"},
      {"redis://alice:pw@host/1", "", "host", 6379, 1, "alice", "pw"},
      {"redis://alice:p%40ss:w/rd@host", "", "host", 6379, 0, "alice", "p@ss:w/rd"},
      {"redis://[::1]:6390", "", "::1", 6390, 0, "", ""},
      {"redis://alice@host", "", "host", 6379, 0, "alice", ""},  // the password comes from a file
      {"unix:///tmp/r.sock?user=kiln&db=2", "/tmp/r.sock", "", 6379, 2, "kiln", ""},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.url);
    Result<RedisEndpoint> endpoint = parse_redis_endpoint(c.url);
    ASSERT_TRUE(endpoint.is_ok()) << endpoint.status().to_string();
    EXPECT_EQ(endpoint->unix_path, c.unix_path);
    EXPECT_EQ(endpoint->host, c.host);
    EXPECT_EQ(endpoint->port, c.port);
    EXPECT_EQ(endpoint->db, c.db);
    EXPECT_EQ(endpoint->username, c.username);
    EXPECT_EQ(endpoint->password, c.password);
    Result<RedisOptions> options = parse_redis_url(c.url);
    ASSERT_TRUE(options.is_ok());
    EXPECT_EQ(options->url, c.url);
    EXPECT_EQ(options->password, c.password);
    EXPECT_EQ(options->db, c.db);
    if (!c.password.empty()) {
      EXPECT_EQ(endpoint->describe().find(c.password), std::string::npos);
    }
  }
}

TEST(RedisUrl, RejectsBadUrlsWithClearErrors) {
  struct Case {
    std::string url;
    StatusCode code;
    std::string message_part;
  };
  const std::vector<Case> cases = {
      {"", StatusCode::kInvalidArgument, "expected unix:///path"},
      {"http://host:6379", StatusCode::kInvalidArgument, "scheme 'http'"},
      {"rediss://host:6379", StatusCode::kUnimplemented, "TLS"},
      {"unix://relative.sock", StatusCode::kInvalidArgument, "absolute socket path"},
      {"unix:///tmp/r.sock?db=x", StatusCode::kInvalidArgument, "db 'x'"},
      {"unix:///tmp/r.sock?timeout=3", StatusCode::kInvalidArgument,
       "unknown query parameter 'timeout'"},
      {"redis://", StatusCode::kInvalidArgument, "missing host"},
      {"redis://:6379", StatusCode::kInvalidArgument, "missing host"},
      {"redis://host:", StatusCode::kInvalidArgument, "empty port"},
      {"redis://host:0", StatusCode::kInvalidArgument, "port '0'"},
      {"redis://host:99999", StatusCode::kInvalidArgument, "port '99999'"},
      {"redis://host:12ab", StatusCode::kInvalidArgument, "port '12ab'"},
      {"redis://host/-1", StatusCode::kInvalidArgument, "db '-1'"},
      {"redis://host?db=2", StatusCode::kInvalidArgument, "query parameters"},
      {"redis://::1:6379", StatusCode::kInvalidArgument, "brackets"},
      {"redis://:hunter2%zz@host", StatusCode::kInvalidArgument, "bad %-escape in the password"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.url);
    Result<RedisOptions> options = parse_redis_url(c.url);
    ASSERT_FALSE(options.is_ok());
    EXPECT_EQ(options.status().code(), c.code) << options.status().to_string();
    EXPECT_NE(options.status().message().find(c.message_part), std::string::npos)
        << options.status().to_string();
    EXPECT_EQ(options.status().message().find("hunter2"), std::string::npos);
  }
}

TEST(RedisClient, ConnectsOverUnixSocketAndPings) {
  RedisServer server;
  KILN_SKIP_WITHOUT(server);
  Result<RedisClient> client = RedisClient::connect(options_for(server.socket_path()));
  ASSERT_TRUE(client.is_ok()) << client.status().to_string();
  EXPECT_TRUE(client->connected());
  EXPECT_TRUE(client->ping().is_ok());
  EXPECT_EQ(client->describe(), "unix://" + server.socket_path());
}

TEST(RedisClient, SetAndGetAreBinarySafe) {
  RedisServer server;
  KILN_SKIP_WITHOUT(server);
  Result<RedisClient> client = RedisClient::connect(options_for(server.socket_path()));
  ASSERT_TRUE(client.is_ok()) << client.status().to_string();
  const std::string key("kiln:test:\0bin", 14);
  const std::string value("a\0b\r\n\xff\0", 7);
  ASSERT_TRUE(client->command({"SET", key, value}).is_ok());
  Result<Reply> got = client->command({"GET", key});
  ASSERT_TRUE(got.is_ok()) << got.status().to_string();
  ASSERT_TRUE(got->is_string());
  EXPECT_EQ(got->str, value);
  Result<Reply> missing = client->command({"GET", "kiln:test:missing"});
  ASSERT_TRUE(missing.is_ok());
  EXPECT_TRUE(missing->is_nil());
  EXPECT_EQ(missing->as_optional_string().value(), std::nullopt);
}

TEST(RedisClient, ErrorReplyBecomesStatusWithServerText) {
  RedisServer server;
  KILN_SKIP_WITHOUT(server);
  Result<RedisClient> client = RedisClient::connect(options_for(server.socket_path()));
  ASSERT_TRUE(client.is_ok()) << client.status().to_string();
  ASSERT_TRUE(client->command({"SET", "kiln:test:str", "x"}).is_ok());
  Result<Reply> wrong_type = client->command({"LPUSH", "kiln:test:str", "y"});
  ASSERT_FALSE(wrong_type.is_ok());
  EXPECT_EQ(wrong_type.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(wrong_type.status().message().rfind("redis LPUSH kiln:test:str: WRONGTYPE", 0), 0u)
      << wrong_type.status().message();
  Result<Reply> unknown = client->command({"NOSUCHCOMMAND"});
  EXPECT_EQ(unknown.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(unknown.status().message().find("unknown command"), std::string::npos);
  EXPECT_EQ(client->command({}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(client->ping().is_ok());  // an error reply leaves the connection usable
}

TEST(RedisClient, PipelinesOneHundredCommands) {
  RedisServer server;
  KILN_SKIP_WITHOUT(server);
  Result<RedisClient> client = RedisClient::connect(options_for(server.socket_path()));
  ASSERT_TRUE(client.is_ok()) << client.status().to_string();
  std::vector<std::vector<std::string>> commands;
  for (int i = 0; i < 99; ++i) commands.push_back({"INCR", "kiln:test:counter"});
  commands.push_back({"LPUSH", "kiln:test:counter", "x"});  // an error mid-pipeline is an element
  Result<std::vector<Reply>> replies = client->pipeline(commands);
  ASSERT_TRUE(replies.is_ok()) << replies.status().to_string();
  ASSERT_EQ(replies->size(), 100u);
  for (int i = 0; i < 99; ++i) EXPECT_EQ((*replies)[i].integer, i + 1);
  EXPECT_EQ(check_reply(replies->back()).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(client->command({"GET", "kiln:test:counter"})->as_integer().value(), 99);
}

TEST(RedisClient, TransactionReturnsExecReplies) {
  RedisServer server;
  KILN_SKIP_WITHOUT(server);
  Result<RedisClient> client = RedisClient::connect(options_for(server.socket_path()));
  ASSERT_TRUE(client.is_ok()) << client.status().to_string();
  Result<std::vector<Reply>> replies = client->transaction(
      {{"SET", "kiln:test:a", "1"}, {"INCR", "kiln:test:a"}, {"GET", "kiln:test:a"}});
  ASSERT_TRUE(replies.is_ok()) << replies.status().to_string();
  ASSERT_EQ(replies->size(), 3u);
  EXPECT_EQ((*replies)[0].str, "OK");
  EXPECT_EQ((*replies)[1].integer, 2);
  EXPECT_EQ((*replies)[2].str, "2");
}

TEST(RedisClient, TransactionRejectedWhileQueueingAppliesNothing) {
  RedisServer server;
  KILN_SKIP_WITHOUT(server);
  Result<RedisClient> client = RedisClient::connect(options_for(server.socket_path()));
  ASSERT_TRUE(client.is_ok()) << client.status().to_string();
  Result<std::vector<Reply>> replies =
      client->transaction({{"SET", "kiln:test:a", "1"}, {"INCR"}});  // INCR lacks its key
  ASSERT_FALSE(replies.is_ok());
  EXPECT_EQ(replies.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(replies.status().message().find("wrong number of arguments"), std::string::npos)
      << replies.status().message();
  EXPECT_TRUE(client->command({"GET", "kiln:test:a"})->is_nil());
}

TEST(RedisClient, TransactionAbortsWhenWatchedKeyChanges) {
  RedisServer server;
  KILN_SKIP_WITHOUT(server);
  Result<RedisClient> client = RedisClient::connect(options_for(server.socket_path()));
  Result<RedisClient> other = RedisClient::connect(options_for(server.socket_path()));
  ASSERT_TRUE(client.is_ok() && other.is_ok());
  ASSERT_TRUE(client->command({"WATCH", "kiln:test:w"}).is_ok());
  ASSERT_TRUE(other->command({"SET", "kiln:test:w", "theirs"}).is_ok());
  Result<std::vector<Reply>> replies = client->transaction({{"SET", "kiln:test:w", "ours"}});
  ASSERT_FALSE(replies.is_ok());
  EXPECT_EQ(replies.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(replies.status().message(), "transaction aborted");
  EXPECT_EQ(client->command({"GET", "kiln:test:w"})->str, "theirs");
}

// Reads "calls=N" for `command` from INFO commandstats (0 when it never ran).
long long command_calls(RedisClient& client, const std::string& command) {
  std::string info = client.command({"INFO", "commandstats"}).value().str;
  std::string needle = "cmdstat_" + command + ":calls=";
  size_t at = info.find(needle);
  return at == std::string::npos ? 0 : std::stoll(info.substr(at + needle.size()));
}

TEST(RedisClient, EvalLoadsScriptOnceThenUsesEvalsha) {
  RedisServer server;
  KILN_SKIP_WITHOUT(server);
  Result<RedisClient> client = RedisClient::connect(options_for(server.socket_path()));
  ASSERT_TRUE(client.is_ok()) << client.status().to_string();
  const std::string script = "return redis.call('INCRBY', KEYS[1], ARGV[1])";
  ASSERT_TRUE(client->command({"CONFIG", "RESETSTAT"}).is_ok());
  Result<Reply> first = client->eval(script, {"kiln:test:n"}, {"5"});
  ASSERT_TRUE(first.is_ok()) << first.status().to_string();
  EXPECT_EQ(first->integer, 5);
  Result<Reply> second = client->eval(script, {"kiln:test:n"}, {"2"});
  ASSERT_TRUE(second.is_ok()) << second.status().to_string();
  EXPECT_EQ(second->integer, 7);
  EXPECT_EQ(command_calls(*client, "eval"), 1);     // only the first call sent the text
  EXPECT_EQ(command_calls(*client, "evalsha"), 2);  // NOSCRIPT once, then a hit
  // After SCRIPT FLUSH the client falls back to EVAL again.
  ASSERT_TRUE(client->command({"SCRIPT", "FLUSH"}).is_ok());
  EXPECT_EQ(client->eval(script, {"kiln:test:n"}, {"1"})->integer, 8);
  Result<Reply> bad = client->eval("return redis.call('NOSUCH')", {}, {});
  EXPECT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("redis EVAL script"), std::string::npos);
}

TEST(RedisAuth, PasswordIsCheckedAtConnect) {
  RedisServer server("requirepass s3cret");
  KILN_SKIP_WITHOUT(server);
  RedisOptions options = options_for(server.socket_path());
  Result<RedisClient> none = RedisClient::connect(options);
  ASSERT_FALSE(none.is_ok());
  EXPECT_EQ(none.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(none.status().message().find("requires a password"), std::string::npos)
      << none.status().message();

  options.password = "hunter2";
  Result<RedisClient> wrong = RedisClient::connect(options);
  ASSERT_FALSE(wrong.is_ok());
  EXPECT_EQ(wrong.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(wrong.status().message().find("AUTH as the default user: WRONGPASS"), std::string::npos)
      << wrong.status().message();
  EXPECT_EQ(wrong.status().message().find("hunter2"), std::string::npos);  // not echoed

  options.password = "s3cret";
  Result<RedisClient> right = RedisClient::connect(options);
  ASSERT_TRUE(right.is_ok()) << right.status().to_string();
  EXPECT_TRUE(right->ping().is_ok());
}

TEST(RedisAuth, AclUserConnectsWithUsernameAndPassword) {
  RedisServer server("user alice on >pw ~* +@all");
  KILN_SKIP_WITHOUT(server);
  Result<RedisOptions> parsed = parse_redis_url("unix://" + server.socket_path() + "?db=1");
  ASSERT_TRUE(parsed.is_ok());
  RedisOptions options = *parsed;
  options.username = "alice";
  options.password = "pw";
  Result<RedisClient> client = RedisClient::connect(options);
  ASSERT_TRUE(client.is_ok()) << client.status().to_string();
  EXPECT_EQ(client->command({"ACL", "WHOAMI"})->str, "alice");
  EXPECT_NE(client->command({"CLIENT", "INFO"})->str.find(" db=1 "), std::string::npos);
  options.password = "nope";
  Result<RedisClient> wrong = RedisClient::connect(options);
  ASSERT_FALSE(wrong.is_ok());
  EXPECT_NE(wrong.status().message().find("AUTH as user 'alice': WRONGPASS"), std::string::npos)
      << wrong.status().message();
}

TEST(RedisClient, ConnectWhereNothingListensIsUnavailable) {
  TempDir dir;
  RedisOptions options = options_for(dir.file("absent.sock"));
  Clock::time_point start = Clock::now();
  Result<RedisClient> client = RedisClient::connect(options);
  ASSERT_FALSE(client.is_ok());
  EXPECT_EQ(client.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(client.status().message().find("connecting to unix://" + dir.file("absent.sock")),
            std::string::npos)
      << client.status().message();
  EXPECT_LT(elapsed_ms(start), options.connect_timeout_ms);

  // A socket file left behind by a dead server refuses connections.
  RedisServer server;
  KILN_SKIP_WITHOUT(server);
  server.kill_now();
  start = Clock::now();
  client = RedisClient::connect(options_for(server.socket_path()));
  EXPECT_EQ(client.status().code(), StatusCode::kUnavailable);
  EXPECT_LT(elapsed_ms(start), options.connect_timeout_ms);
}

// Contract: command() notices the lost connection, reconnects and returns kUnavailable without
// retrying; command_idempotent() retries once on the new connection and succeeds.
TEST(RedisReconnect, ReconnectsAfterServerRestartOnTheSamePath) {
  TempDir dir;
  std::string link = dir.file("redis.sock");
  RedisServer first;
  KILN_SKIP_WITHOUT(first);
  point_link(link, first.socket_path());
  Result<RedisClient> client = RedisClient::connect(options_for(link));
  ASSERT_TRUE(client.is_ok()) << client.status().to_string();
  ASSERT_TRUE(client->command({"SET", "kiln:test:k", "v1"}).is_ok());

  first.kill_now();
  RedisServer second;
  KILN_SKIP_WITHOUT(second);
  point_link(link, second.socket_path());
  Result<Reply> lost = client->command({"SET", "kiln:test:k", "v2"});
  ASSERT_FALSE(lost.is_ok());
  EXPECT_EQ(lost.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(lost.status().message().find("reconnected, but did not retry"), std::string::npos)
      << lost.status().message();
  EXPECT_TRUE(client->connected());
  EXPECT_TRUE(client->command({"GET", "kiln:test:k"})->is_nil());  // fresh server, no retry

  second.kill_now();
  RedisServer third;
  KILN_SKIP_WITHOUT(third);
  point_link(link, third.socket_path());
  Result<Reply> retried = client->command_idempotent({"SET", "kiln:test:k", "v3"});
  ASSERT_TRUE(retried.is_ok()) << retried.status().to_string();
  EXPECT_EQ(client->command({"GET", "kiln:test:k"})->str, "v3");
}

TEST(RedisReconnect, UnavailableWhileServerIsDownThenRecovers) {
  TempDir dir;
  std::string link = dir.file("redis.sock");
  RedisServer first;
  KILN_SKIP_WITHOUT(first);
  point_link(link, first.socket_path());
  RedisOptions options = options_for(link);
  options.reconnect_backoff_initial_ms = 20;  // waits 20 + 40 ms between the 3 attempts
  Result<RedisClient> client = RedisClient::connect(options);
  ASSERT_TRUE(client.is_ok()) << client.status().to_string();

  first.kill_now();
  Clock::time_point start = Clock::now();
  Status down = client->ping();
  EXPECT_EQ(down.code(), StatusCode::kUnavailable);
  EXPECT_NE(down.message().find("reconnect failed after 3 attempts"), std::string::npos)
      << down.message();
  EXPECT_GE(elapsed_ms(start), 60);
  EXPECT_FALSE(client->connected());
  EXPECT_EQ(client->command({"PING"}).status().code(), StatusCode::kUnavailable);

  RedisServer second;
  KILN_SKIP_WITHOUT(second);
  point_link(link, second.socket_path());
  EXPECT_TRUE(client->ping().is_ok());
}

// Contract: no reply within command_timeout_ms is kDeadlineExceeded (never retried, even for
// idempotent commands); the connection is dropped and the next call reconnects.
TEST(RedisClient, CommandTimeoutIsDeadlineExceeded) {
  RedisServer server;
  KILN_SKIP_WITHOUT(server);
  RedisOptions options = options_for(server.socket_path());
  options.command_timeout_ms = 200;
  Result<RedisClient> client = RedisClient::connect(options);
  ASSERT_TRUE(client.is_ok()) << client.status().to_string();
  Clock::time_point start = Clock::now();
  // BLPOP on an empty list holds the reply for 2 s while the server stays responsive.
  Result<Reply> slow = client->command_idempotent({"BLPOP", "kiln:test:empty", "2"});
  long long waited_ms = elapsed_ms(start);
  ASSERT_FALSE(slow.is_ok());
  EXPECT_EQ(slow.status().code(), StatusCode::kDeadlineExceeded) << slow.status().to_string();
  EXPECT_NE(slow.status().message().find("no reply within 200 ms"), std::string::npos);
  EXPECT_GE(waited_ms, 150);
  EXPECT_LT(waited_ms, 1500);
  EXPECT_FALSE(client->connected());
  EXPECT_TRUE(client->ping().is_ok());
}

}  // namespace
}  // namespace kiln::redis
