// Redis connection options and URL parsing: "unix:///path/to.sock[?db=N][&user=NAME]" and
// "redis://[user[:password]@]host[:port][/db]". A URL may name a user without its password,
// which then comes from RedisOptions::password (e.g. read from a file).
#pragma once

#include <string>
#include <string_view>

#include "shared/status.h"

namespace kiln::redis {

// Where and how to connect. Credentials and db set here win over those carried by the URL.
struct RedisOptions {
  // "unix:///path/to.sock[?db=N][&user=NAME]" or "redis://[user[:password]@]host[:port][/db]".
  std::string url;
  std::string username;  // ACL user; empty = the default user
  std::string password;  // empty = no AUTH
  int db = 0;            // SELECT when not 0
  int connect_timeout_ms = 2000;
  int command_timeout_ms = 5000;
  // After a lost connection: attempts (at least one) to reconnect, waiting initial, 2x, 4x ...
  // (capped at max) between them.
  int max_reconnect_attempts = 5;
  int reconnect_backoff_initial_ms = 100;
  int reconnect_backoff_max_ms = 5000;
  // When > 0: after a lost connection, reconnect attempts go on (at the back-off cap) until this
  // long has passed, so a Redis restart of a few seconds or minutes does not stop a coordinator.
  int reconnect_for_ms = 0;
};

// A parsed URL: the location plus whatever credentials and db it carried.
struct RedisEndpoint {
  std::string unix_path;  // set for unix:// URLs
  std::string host;       // set for redis:// URLs
  int port = 6379;
  std::string username;
  std::string password;
  int db = 0;
  // "unix:///path" or "redis://host:port", plus "/db" when not 0; never the credentials.
  std::string describe() const;
};

// Parses `url`; user and password may be percent-encoded (%40 for '@'). Errors name the offending
// part and never echo a password.
Result<RedisEndpoint> parse_redis_endpoint(std::string_view url);
// RedisOptions for `url` with username, password and db taken from it; timeouts keep defaults.
Result<RedisOptions> parse_redis_url(std::string_view url);

}  // namespace kiln::redis
