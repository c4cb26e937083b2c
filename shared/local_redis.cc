// Starts and stops a private redis-server.
#include "shared/local_redis.h"

#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

#include "shared/text.h"

extern char** environ;

namespace kiln {
namespace fs = std::filesystem;
namespace {

bool accepts_connections(const std::string& path) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", path.c_str());
  bool ok = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  close(fd);
  return ok;
}

std::string log_tail(const std::string& path) {
  std::ifstream in(path);
  std::string line, tail;
  while (std::getline(in, line)) {
    tail += line + "\n";
    if (tail.size() > 2000) tail.erase(0, tail.size() - 2000);
  }
  return tail;
}

}  // namespace

std::string LocalRedis::log_tail() const { return kiln::log_tail(dir_ + "/redis.log"); }

bool LocalRedis::loaded_truncated_aof() const {
  // Its log lines begin "<pid>:M": this server's, not an earlier one's in the same file.
  const std::string log = "\n" + log_tail();
  const std::string mine = "\n" + std::to_string(pid()) + ":";
  for (size_t at = log.find(mine); at != std::string::npos; at = log.find(mine, at + 1)) {
    const size_t end = log.find('\n', at + 1);
    if (log.substr(at, end - at).find("aof-load-truncated") != std::string::npos) return true;
  }
  return false;
}

std::string find_redis_server() {
  if (const char* env = std::getenv("KILN_REDIS_SERVER"); env && *env) return env;
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec && fs::exists(exe.parent_path() / "redis-server")) {
    return (exe.parent_path() / "redis-server").string();
  }
  return "redis-server";
}

namespace {

// A value of redis.conf in double quotes, so that a path with spaces, quotes or control
// characters is one argument: redis-server reads \\, \" and \xHH escapes inside them.
std::string config_quoted(const std::string& value) {
  std::string out = "\"";
  for (unsigned char c : value) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c == 0x7f) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", c);
      out += hex;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

}  // namespace

Result<std::unique_ptr<LocalRedis>> LocalRedis::start(const LocalRedisOptions& options) {
  std::error_code ec;
  fs::create_directories(options.dir, ec);
  if (ec) return unavailable("creating " + options.dir + ": " + ec.message());
  std::unique_ptr<LocalRedis> r(new LocalRedis());
  std::string dir = fs::absolute(options.dir).string();
  r->dir_ = dir;
  r->socket_ = dir + "/redis.sock";
  // A unix socket path is limited to 107 bytes.
  if (r->socket_.size() > 100) {
    return invalid_argument("the socket path " + log_safe(r->socket_, 200) + " is " +
                            std::to_string(r->socket_.size()) +
                            " bytes, and a unix socket's may have at most 100: use a folder "
                            "with a shorter path");
  }
  fs::remove(r->socket_, ec);
  std::string conf = dir + "/redis.conf";
  {
    std::ofstream out(conf);
    out << "port 0\nunixsocket " << config_quoted(r->socket_) << "\nunixsocketperm 700\ndir "
        << config_quoted(dir) << "\ndaemonize no\nlogfile " << config_quoted(dir + "/redis.log")
        << "\nsave \"\"\n"
        << (options.persist ? "appendonly yes\nappendfsync everysec\n" : "appendonly no\n")
        << options.extra_config << "\n";
    if (!out) return unavailable("writing " + conf);
  }
  r->server_ = find_redis_server();
  SpawnOptions spawn;
  spawn.argv = {r->server_, conf};
  spawn.new_process_group = true;  // Ctrl-C in a terminal goes to kiln, which stops redis
  Result<ChildProcess> child = ChildProcess::spawn(spawn);
  if (!child.is_ok()) {
    return unavailable(child.status().message() + " (install redis-server: scripts/bootstrap)");
  }
  r->child_.emplace(std::move(child).value());
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(options.start_timeout_ms);
  while (std::chrono::steady_clock::now() < deadline) {
    if (accepts_connections(r->socket_)) return r;
    if (!r->child_->running()) {
      r->child_.reset();
      return unavailable(r->server_ + " exited at start; its log says:\n" + r->log_tail());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return deadline_exceeded(r->server_ + " did not listen on " + r->socket_ + " within " +
                           std::to_string(options.start_timeout_ms) + " ms");
}

void LocalRedis::kill_now() {
  if (child_) child_->kill_now();
  child_.reset();
}

LocalRedis::~LocalRedis() {
  // SIGTERM: redis-server writes what its AOF still lacks and exits; SIGKILL after 3 s.
  if (child_) child_->stop(std::chrono::seconds(3));
}

}  // namespace kiln
