// Test support implementation: temporary directories, a private redis-server, command runner.
#include "tests/support/test_env.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
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
  std::filesystem::create_directories(std::filesystem::path(p).parent_path());
  std::ofstream(p, std::ios::binary) << content;
  return p;
}

std::string run_two_model_farm(const TempDir& dir, const std::string& coordinator_args) {
  const std::string out = dir.path() + "/coord";
  const std::string kiln = kiln_binary();
  const std::string targets = " --targets-dir " + builtin_targets_dir();
  const std::string evaluator = kiln + " evaluator --connect $(cat " + out +
                                "/endpoint) --backend cpu --cache-dir " + dir.path() + "/cache" +
                                targets;
  const std::string script =
      "set -u\n" + kiln + " coordinator --bind 'tcp://127.0.0.1:*' --backend cpu " +
      coordinator_args + " --out " + out + targets + " > " + dir.path() +
      "/coord.log 2>&1 & coord=$!\n" + "for i in $(seq 1 300); do [ -s " + out +
      "/endpoint ] && break; sleep 0.1; done\n" + evaluator +
      " --gpu-model 'Model Alpha' --worker-id eval-alpha > " + dir.path() +
      "/alpha.log 2>&1 & a=$!\n" + evaluator + " --gpu-model beta --worker-id eval-beta > " +
      dir.path() + "/beta.log 2>&1 & b=$!\n" +
      "wait $coord; echo rc=$?; kill $a $b; wait $a $b; cat " + dir.path() + "/coord.log\n";
  std::string output;
  run_command("bash " + dir.write("farm.sh", script) + " 2>&1", &output);
  return output;
}

std::string kiln_binary() {
  // A bundle carries tests/ beside bin/, away from the build tree the path was compiled for.
  if (const char* env = std::getenv("KILN_BIN"); env && *env) return env;
  if (std::filesystem::exists(KILN_BINARY)) return KILN_BINARY;
  std::error_code ec;
  auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  return (self.parent_path().parent_path() / "bin" / "kiln").string();
}

std::string source_root() {
  if (const char* env = std::getenv("KILN_SOURCE_DIR"); env && *env) return env;
  return KILN_SOURCE_DIR;
}

std::string builtin_targets_dir() { return source_root() + "/targets"; }

Result<TargetSpec> load_builtin_target(const std::string& name) {
  return load_target(builtin_targets_dir() + "/" + name);
}

void copy_builtin_target(const std::string& name, const std::string& targets_dir,
                         const std::function<void(nlohmann::json&)>& edit) {
  namespace fs = std::filesystem;
  const std::string to = targets_dir + "/" + name;
  fs::create_directories(targets_dir);
  fs::copy(builtin_targets_dir() + "/" + name, to, fs::copy_options::recursive);
  nlohmann::json spec = nlohmann::json::parse(std::ifstream(to + "/target.json"));
  edit(spec);
  std::ofstream(to + "/target.json") << spec.dump(2);
}

RedisServer::RedisServer(const std::string& extra_config) {
  LocalRedisOptions options;
  options.dir = dir_.path();
  options.extra_config = extra_config;
  socket_ = dir_.path() + "/redis.sock";
  Result<std::unique_ptr<LocalRedis>> r = LocalRedis::start(options);
  if (r.is_ok()) {
    redis_ = std::move(r).value();
  } else {
    error_ = r.status().message();
  }
}

RedisServer::~RedisServer() = default;

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in, nullptr, false);
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

int free_tcp_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  int port = -1;
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0)
    port = ntohs(a.sin_port);
  close(fd);
  return port;
}

std::string status_schema_problem(const std::string& json_text) {
  static std::atomic<int> n{0};
  const std::string file = std::filesystem::temp_directory_path().string() + "/kiln-status-" +
                           std::to_string(getpid()) + "-" + std::to_string(n++) + ".json";
  std::ofstream(file) << json_text;
  std::string check;
  const int rc = run_command(
      "python3 -c 'import json,sys,jsonschema; jsonschema.validate(json.load(open(sys.argv[1])), "
      "json.load(open(sys.argv[2])))' " +
          file + " " + std::string(KILN_SOURCE_DIR) + "/docs/status.schema.json",
      &check);
  std::remove(file.c_str());
  return rc == 0 ? "" : "python3-jsonschema: " + check;
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

std::string connect_store(const RedisServer& server, std::optional<redis::RedisClient>* client,
                          std::optional<redis::Store>* store) {
  if (!server.started()) return "redis-server did not start: " + server.error();
  redis::RedisOptions o;
  o.url = "unix://" + server.socket_path();
  Result<redis::RedisClient> c = redis::RedisClient::connect(o);
  if (!c.is_ok()) return c.status().to_string();
  client->emplace(std::move(c).value());
  store->emplace(**client);
  Status schema = (*store)->init_schema();
  return schema.is_ok() ? "" : schema.to_string();
}

}  // namespace kiln::testing
