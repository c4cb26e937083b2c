// Redis credentials kept off the command line (docs/security.md): `--redis-password-file FILE`
// for the commands that take --redis, and URLs shown in messages without their password.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "shared/redis_url.h"
#include "shared/status.h"

namespace kiln::cli {

// Adds --redis-password-file to `sub`.
void add_redis_password_option(CLI::App* sub, std::string& path);

// Reads the password from `path` (its first line, without the line break) into options.password.
// The user, when it is an ACL user, comes from the URL (redis://USER@host, unix:///path?user=USER).
// Refuses a file that group or others may read (chmod 600), an empty one, and a URL that carries
// a password of its own. Errors never contain the password.
Status apply_redis_password_file(const std::string& path, redis::RedisOptions& options);

// `url` with the password it carries, if any, replaced by "***": for messages and resume hints.
std::string redis_url_for_display(const std::string& url);

}  // namespace kiln::cli
