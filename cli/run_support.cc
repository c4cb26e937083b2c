// The machinery under `kiln run` and `kiln coordinator` (see run_support.h).
#include "cli/run_support.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "shared/text.h"

namespace kiln::cli {

namespace fs = std::filesystem;

// "90s", "30m", "2h" or plain seconds; `option` names the flag in errors.
Result<std::chrono::seconds> parse_duration(const std::string& text, const std::string& option) {
  const std::string bad =
      option + ": '" + text.substr(0, 60) + "' is not a duration like 90s, 30m, 1.5h or 2h";
  if (text.empty()) return invalid_argument(option + ": empty");
  // Digits, at most one decimal point, then the unit: no signs, exponents, hex or spaces.
  size_t used = 0, points = 0;
  while (used < text.size() && (std::isdigit(static_cast<unsigned char>(text[used])) ||
                                (text[used] == '.' && points++ == 0)))
    ++used;
  if (used == 0 || text[0] == '.' || text[used - 1] == '.') return invalid_argument(bad);
  const std::string unit = text.substr(used);
  const int64_t scale = unit.empty() || unit == "s" ? 1 : unit == "m" ? 60 : unit == "h" ? 3600 : 0;
  if (scale == 0) return invalid_argument(bad);
  const double seconds = std::strtod(text.substr(0, used).c_str(), nullptr) * scale;
  if (seconds > static_cast<double>(kMaxDurationSeconds)) {
    return invalid_argument(option + ": '" + text.substr(0, 60) + "' is longer than kiln takes (" +
                            std::to_string(kMaxDurationSeconds / 3600) + "h, a year)");
  }
  if (seconds != std::floor(seconds)) {
    return invalid_argument(option + ": '" + text.substr(0, 60) +
                            "' is not a whole number of seconds");
  }
  return std::chrono::seconds(static_cast<int64_t>(seconds));
}

Status check_list(const std::string& text, const std::string& option) {
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) {
      return invalid_argument(option + ": '" + text.substr(0, 60) +
                              "' has an empty item (two commas, or one at the start)");
    }
  }
  return Status::ok();
}

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

Result<std::vector<int>> parse_gpu_list(const std::string& text, const std::string& option) {
  std::vector<int> out;
  for (const std::string& item : split_list(text)) {
    const std::optional<int64_t> g = parse_int64(item);
    if (!g || *g < 0 || *g > 4095) {
      return invalid_argument(option + ": '" + item.substr(0, 40) +
                              "' is not a GPU index (0, 1, ...: `kiln version` lists the GPUs)");
    }
    if (std::find(out.begin(), out.end(), *g) != out.end()) {
      return invalid_argument(option + ": GPU " + item +
                              " is named twice (one evaluator per GPU: two would time each other)");
    }
    out.push_back(static_cast<int>(*g));
  }
  return out;
}

// Whether `pid` is a live process (a zombie, or a pid no one holds, is not).
bool process_alive(pid_t pid) {
  if (pid <= 0 || kill(pid, 0) != 0) return false;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  const size_t paren = text.rfind(')');
  return paren == std::string::npos || paren + 2 >= text.size() ||
         (text[paren + 2] != 'Z' && text[paren + 2] != 'X');
}

// Holds <out>/.kiln.lock (flock) while this process works in the folder; the kernel lets go when
// the process dies, however it dies. Not inherited by children (O_CLOEXEC).
Result<int> lock_folder(const std::string& out) {
  const std::string path = out + "/.kiln.lock";
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return unavailable("opening " + path + ": " + std::strerror(errno));
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    close(fd);
    return failed_precondition("another kiln process is working in " + out + " (it holds " + path +
                               "); stop it first, or choose another --out");
  }
  return fd;
}

NewFolderGuard::NewFolderGuard(const std::string& path) : armed_(false) {
  if (path.empty()) return;
  std::error_code ec;
  fs::path p = fs::absolute(path, ec).lexically_normal();
  if (!ec && p.filename().empty()) p = p.parent_path();  // "out/" names "out"
  if (ec) return;
  if (fs::is_directory(p, ec)) {
    // A folder that was there: what the run adds goes, what was there stays.
    for (const auto& entry : fs::directory_iterator(p, ec)) {
      existing_.insert(entry.path().filename().string());
    }
    if (ec) return;
    path_ = p.string();
    existed_ = true;
    armed_ = true;
    return;
  }
  if (fs::exists(p, ec) || ec) return;
  // The highest folder of the path that does not exist yet: creating the path makes it and
  // everything under it.
  while (p.has_parent_path() && p.parent_path() != p && !fs::exists(p.parent_path(), ec) && !ec)
    p = p.parent_path();
  if (ec) return;
  path_ = p.string();
  armed_ = true;
}

NewFolderGuard::~NewFolderGuard() {
  if (!armed_) return;
  std::error_code ec;  // best effort: the run's error was already said
  if (!existed_) {
    fs::remove_all(path_, ec);
    return;
  }
  std::vector<fs::path> added;
  for (const auto& entry : fs::directory_iterator(path_, ec)) {
    if (!existing_.count(entry.path().filename().string())) added.push_back(entry.path());
  }
  for (const fs::path& a : added) fs::remove_all(a, ec);
}

// A private redis-server that a run which died left behind (it runs in its own process group and
// outlives kiln) still serves <dir>/redis.sock: it is asked to SHUTDOWN, which writes everything
// it acknowledged to its AOF and removes the socket, so that the new one loads all of it. OK when
// nothing listens there.
Status stop_stale_redis(const std::string& dir) {
  const std::string sock = dir + "/redis.sock";
  if (!fs::exists(sock)) return Status::ok();
  redis::RedisOptions o;
  o.url = "unix://" + sock;
  o.connect_timeout_ms = 1000;
  o.max_reconnect_attempts = 1;
  Result<redis::RedisClient> c = redis::RedisClient::connect(o);
  if (!c.is_ok()) return Status::ok();  // a socket file that nothing listens on
  pid_t pid = -1;
  std::ifstream(dir + "/redis.pid") >> pid;
  std::fprintf(stderr,
               "kiln run: the private redis-server of an earlier kiln process is still running; "
               "restarting it from its AOF\n");
  (void)c->command({"SHUTDOWN"});  // the server closes the connection as it goes
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(15);
  while (std::chrono::steady_clock::now() < deadline) {
    bool listening = false;
    if (fs::exists(sock)) listening = redis::RedisClient::connect(o).is_ok();
    std::ifstream cmdline("/proc/" + std::to_string(pid) + "/cmdline");
    std::string command((std::istreambuf_iterator<char>(cmdline)),
                        std::istreambuf_iterator<char>());
    const bool ours =
        process_alive(pid) && command.find("redis") != std::string::npos;  // not a reused pid
    if (!listening && !ours) return Status::ok();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return unavailable("the earlier redis-server in " + dir +
                     (pid > 0 ? " (pid " + std::to_string(pid) + ")" : "") +
                     " did not stop after SHUTDOWN; stop it, then run again");
}

// Connects to Redis, waiting while it answers LOADING: a redis-server restarted from its AOF
// accepts connections before it has read the file back.
Result<redis::RedisClient> connect_when_loaded(const redis::RedisOptions& options) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(2);
  while (true) {
    Result<redis::RedisClient> c = redis::RedisClient::connect(options);
    if (c.is_ok() || c.status().message().find("LOADING") == std::string::npos ||
        std::chrono::steady_clock::now() > deadline) {
      return c;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

}  // namespace kiln::cli
