// Parsing of Redis URLs into RedisEndpoint/RedisOptions. Errors name the offending part of the
// URL and never echo a password.
#include "shared/redis_url.h"

#include <algorithm>
#include <charconv>

namespace kiln::redis {

namespace {

constexpr std::string_view kUnixScheme = "unix://";
constexpr std::string_view kRedisScheme = "redis://";
constexpr std::string_view kTlsScheme = "rediss://";

Result<int> parse_int(std::string_view text, int min, int max, std::string_view what) {
  int value = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc() || ptr != end || value < min || value > max) {
    return invalid_argument("redis URL: " + std::string(what) + " '" + std::string(text) +
                            "' is not an integer in [" + std::to_string(min) + ", " +
                            std::to_string(max) + "]");
  }
  return value;
}

// Decodes %XX escapes; the error names `what` rather than echoing the text (it may be a password).
Result<std::string> percent_decode(std::string_view text, std::string_view what) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '%') {
      out += text[i];
      continue;
    }
    int value = 0;
    if (i + 2 >= text.size()) {
      return invalid_argument("redis URL: truncated %-escape in the " + std::string(what));
    }
    auto [ptr, ec] = std::from_chars(text.data() + i + 1, text.data() + i + 3, value, 16);
    if (ec != std::errc() || ptr != text.data() + i + 3) {
      return invalid_argument("redis URL: bad %-escape in the " + std::string(what));
    }
    out += static_cast<char>(value);
    i += 2;
  }
  return out;
}

Status parse_unix(std::string_view rest, RedisEndpoint& endpoint) {
  std::string_view path = rest.substr(0, rest.find('?'));
  if (path.size() < 2 || path.front() != '/') {
    return invalid_argument(
        "redis URL: a unix URL needs an absolute socket path, as in "
        "unix:///run/redis/redis.sock");
  }
  endpoint.unix_path = std::string(path);
  if (path.size() == rest.size()) return Status::ok();
  std::string_view query = rest.substr(path.size() + 1);
  while (!query.empty()) {
    std::string_view item = query.substr(0, query.find('&'));
    query.remove_prefix(std::min(query.size(), item.size() + 1));
    if (item.substr(0, 5) == "user=") {  // an ACL user; its password comes from elsewhere
      KILN_ASSIGN_OR_RETURN(endpoint.username, percent_decode(item.substr(5), "user"));
      continue;
    }
    if (item.substr(0, 3) != "db=") {
      return invalid_argument("redis URL: unknown query parameter '" +
                              std::string(item.substr(0, item.find('='))) +
                              "' (a unix URL accepts only ?db=N and user=NAME)");
    }
    KILN_ASSIGN_OR_RETURN(endpoint.db, parse_int(item.substr(3), 0, 1 << 30, "db"));
  }
  return Status::ok();
}

Status parse_tcp(std::string_view rest, RedisEndpoint& endpoint) {
  if (rest.find('?') != std::string_view::npos) {
    return invalid_argument(
        "redis URL: query parameters are not supported in redis:// URLs; "
        "give the db as the path, as in redis://host:6379/2");
  }
  // The password may contain '/' or ':' unescaped, so userinfo ends at the last '@'.
  if (size_t at = rest.rfind('@'); at != std::string_view::npos) {
    std::string_view userinfo = rest.substr(0, at);
    rest.remove_prefix(at + 1);
    // redis://user@host names the user only: the password comes from elsewhere (a file).
    size_t colon = userinfo.find(':');
    KILN_ASSIGN_OR_RETURN(endpoint.username, percent_decode(userinfo.substr(0, colon), "user"));
    if (colon != std::string_view::npos) {
      KILN_ASSIGN_OR_RETURN(endpoint.password,
                            percent_decode(userinfo.substr(colon + 1), "password"));
    }
  }
  std::string_view host_port = rest.substr(0, rest.find('/'));
  std::string_view path = rest.substr(host_port.size());
  std::string_view port_text;
  if (!host_port.empty() && host_port.front() == '[') {  // [IPv6]:port
    size_t close = host_port.find(']');
    if (close == std::string_view::npos) return invalid_argument("redis URL: unclosed '[' in host");
    endpoint.host = std::string(host_port.substr(1, close - 1));
    std::string_view after = host_port.substr(close + 1);
    if (!after.empty() && after.front() != ':') {
      return invalid_argument("redis URL: expected ':port' after ']'");
    }
    if (!after.empty()) port_text = after.substr(1);
    if (!after.empty() && port_text.empty()) return invalid_argument("redis URL: empty port");
  } else {
    size_t colon = host_port.find(':');
    if (colon != std::string_view::npos &&
        host_port.find(':', colon + 1) != std::string_view::npos) {
      return invalid_argument("redis URL: an IPv6 host needs brackets, as in redis://[::1]:6379");
    }
    endpoint.host = std::string(host_port.substr(0, colon));
    if (colon != std::string_view::npos) {
      port_text = host_port.substr(colon + 1);
      if (port_text.empty()) return invalid_argument("redis URL: empty port");
    }
  }
  if (endpoint.host.empty()) return invalid_argument("redis URL: missing host");
  if (endpoint.host.find_first_of(" \t\r\n") != std::string::npos) {
    return invalid_argument("redis URL: whitespace in host");
  }
  if (!port_text.empty()) {
    KILN_ASSIGN_OR_RETURN(endpoint.port, parse_int(port_text, 1, 65535, "port"));
  }
  if (path.size() > 1) {
    KILN_ASSIGN_OR_RETURN(endpoint.db, parse_int(path.substr(1), 0, 1 << 30, "db"));
  }
  return Status::ok();
}

}  // namespace

std::string RedisEndpoint::describe() const {
  std::string out = unix_path.empty()
                        ? std::string(kRedisScheme) + host + ":" + std::to_string(port)
                        : std::string(kUnixScheme) + unix_path;
  if (db != 0) out += (unix_path.empty() ? "/" : "?db=") + std::to_string(db);
  return out;
}

Result<RedisEndpoint> parse_redis_endpoint(std::string_view url) {
  RedisEndpoint endpoint;
  Status status;
  if (url.starts_with(kUnixScheme)) {
    status = parse_unix(url.substr(kUnixScheme.size()), endpoint);
  } else if (url.starts_with(kRedisScheme)) {
    status = parse_tcp(url.substr(kRedisScheme.size()), endpoint);
  } else if (url.starts_with(kTlsScheme)) {
    status = unimplemented(
        "redis URL: TLS (rediss://) is not supported; use redis:// on a "
        "trusted network or a unix socket");
  } else {
    std::string_view scheme = url.substr(0, std::min(url.find("://"), size_t{16}));
    status = invalid_argument(
        "redis URL: expected unix:///path/to.sock or "
        "redis://[user:password@]host[:port][/db], got scheme '" +
        std::string(scheme) + "'");
  }
  if (!status.is_ok()) return status;
  return endpoint;
}

Result<RedisOptions> parse_redis_url(std::string_view url) {
  KILN_ASSIGN_OR_RETURN(RedisEndpoint endpoint, parse_redis_endpoint(url));
  RedisOptions options;
  options.url = std::string(url);
  options.username = endpoint.username;
  options.password = endpoint.password;
  options.db = endpoint.db;
  return options;
}

}  // namespace kiln::redis
