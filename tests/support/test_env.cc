// Test support implementation: temporary directories, a private redis-server, command runner.
#include "tests/support/test_env.h"

#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <thread>

namespace kiln::testing {

TempDir::TempDir() {
  const char* base = std::getenv("TMPDIR");
  std::string tmpl = std::string(base && *base ? base : "/tmp") + "/kiln-test-XXXXXX";
  if (mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed for " + tmpl);
  path_ = tmpl;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::string TempDir::write(const std::string& name, const std::string& content) const {
  std::string p = file(name);
  std::ofstream(p, std::ios::binary) << content;
  return p;
}

std::string kiln_binary() {
  // A bundle carries tests/ beside bin/, away from the build tree the path was compiled for.
  if (const char* env = std::getenv("KILN_BIN"); env && *env) return env;
  if (std::filesystem::exists(KILN_BINARY)) return KILN_BINARY;
  std::error_code ec;
  auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  return (self.parent_path().parent_path() / "bin" / "kiln").string();
}

namespace {

std::string find_redis_server() {
  if (const char* env = std::getenv("KILN_REDIS_SERVER"); env && *env) return env;
  std::filesystem::path beside = std::filesystem::path(kiln_binary()).parent_path() / "redis-server";
  if (std::filesystem::exists(beside)) return beside.string();
  return "redis-server";  // from PATH
}

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

}  // namespace

RedisServer::RedisServer(const std::string& extra_config) {
  socket_ = dir_.file("redis.sock");
  std::string conf = dir_.write(
      "redis.conf", "port 0\nunixsocket " + socket_ + "\nunixsocketperm 700\ndir " + dir_.path() +
                        "\nsave \"\"\nappendonly no\ndaemonize no\nlogfile " +
                        dir_.file("redis.log") + "\n" + extra_config + "\n");
  std::string server = find_redis_server();
  pid_ = fork();
  if (pid_ == 0) {
    execlp(server.c_str(), server.c_str(), conf.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  if (pid_ < 0) {
    error_ = "fork failed";
    return;
  }
  // Wait until a connect succeeds: redis creates the socket file a moment before it listens.
  for (int i = 0; i < 500; ++i) {
    if (accepts_connections(socket_)) return;
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      error_ = "redis-server (" + server + ") exited at start; is it installed? " +
               "(scripts/bootstrap installs it)";
      pid_ = -1;
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  error_ = "redis-server did not open " + socket_ + " within 5 s";
  kill_now();
}

void RedisServer::kill_now() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  waitpid(pid_, nullptr, 0);
  pid_ = -1;
}

RedisServer::~RedisServer() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGTERM);
  for (int i = 0; i < 200; ++i) {
    if (waitpid(pid_, nullptr, WNOHANG) == pid_) {
      pid_ = -1;
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  kill_now();
}

int run_command(const std::string& command, std::string* output) {
  output->clear();
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (!pipe) return -1;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), pipe)) > 0) output->append(buf, n);
  int status = pclose(pipe);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace kiln::testing
