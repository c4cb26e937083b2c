// See redis_password.h.
#include "cli/redis_password.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <fstream>

#include "shared/text.h"

namespace kiln::cli {

void add_redis_password_option(CLI::App* sub, std::string& path) {
  sub->add_option(
         "--redis-password-file", path,
         "Read the --redis password from this file (first line; mode 0600), so that it is on\n"
         "no command line; name an ACL user in the URL: redis://USER@host:port or\n"
         "unix:///path?user=USER (docs/security.md)")
      ->check(CLI::ExistingFile);
}

Status apply_redis_password_file(const std::string& path, redis::RedisOptions& options) {
  KILN_ASSIGN_OR_RETURN(redis::RedisEndpoint endpoint, redis::parse_redis_endpoint(options.url));
  if (!endpoint.password.empty()) {
    return invalid_argument(
        "--redis-password-file: the --redis URL carries a password already; give it in one "
        "place only (the file keeps it off the command line)");
  }
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    return not_found("--redis-password-file: cannot read " + path + ": " + errno_text(errno));
  if ((st.st_mode & 077) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    return failed_precondition("--redis-password-file: group or others may access " + path +
                               " (mode " + mode + "); run `chmod 600 " + path + "`");
  }
  std::ifstream in(path);
  std::string password;
  if (!in || !std::getline(in, password)) {
    return invalid_argument("--redis-password-file: " + path +
                            " is empty; write the password on its first line");
  }
  if (!password.empty() && password.back() == '\r') password.pop_back();
  if (password.empty()) {
    return invalid_argument("--redis-password-file: the first line of " + path +
                            " is empty; write the password there");
  }
  options.password = std::move(password);
  return Status::ok();
}

std::string redis_url_for_display(const std::string& url) {
  const std::string scheme = "redis://";
  if (url.rfind(scheme, 0) != 0) return url;
  const std::string rest = url.substr(scheme.size());
  const size_t at = rest.rfind('@');  // a password may hold '/' and ':' unescaped
  if (at == std::string::npos) return url;
  const std::string userinfo = rest.substr(0, at);
  const size_t colon = userinfo.find(':');
  if (colon == std::string::npos) return url;
  return scheme + userinfo.substr(0, colon) + ":***@" + rest.substr(at + 1);
}

}  // namespace kiln::cli
