// The machinery under `kiln run` and `kiln coordinator`: durations, lists, the output folder's
// lock and its removal when a new run fails to start, a private Redis a dead run left behind,
// and a Redis still loading its AOF.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <set>
#include <string>
#include <vector>

#include "shared/redis_client.h"
#include "shared/status.h"

namespace kiln::cli {

// "90s", "30m", "1.5h", "2h" or plain seconds: a whole number of seconds, at most a year (a
// larger number once wrapped to a negative budget); `option` names the flag in errors.
Result<std::chrono::seconds> parse_duration(const std::string& text,
                                            const std::string& option = "--budget");
inline constexpr int64_t kMaxDurationSeconds = int64_t{366} * 24 * 3600;

// "a,b,,c" -> {"a", "b", "c"}.
std::vector<std::string> split_list(const std::string& s);
// INVALID_ARGUMENT where a comma-separated list has an empty item: "," or "a,,b" (an empty
// --targets item once meant every target). A trailing comma is allowed.
Status check_list(const std::string& text, const std::string& option);

// "0,2,3" -> {0, 2, 3}: each a whole number from 0 to 4095, none twice (two evaluators on one GPU
// would time each other). `option` names the flag in errors.
Result<std::vector<int>> parse_gpu_list(const std::string& text,
                                        const std::string& option = "--gpus");

// Whether `pid` is a live process (a zombie, or a pid no one holds, is not).
bool process_alive(pid_t pid);

// Holds <out>/.kiln.lock (flock) while this process works in the folder; the kernel lets go when
// the process dies, however it dies. Not inherited by children (O_CLOEXEC). The descriptor.
Result<int> lock_folder(const std::string& out);

// The output folder of a run that may not start: when this goes out of scope, a folder the run
// made is removed with the parents that creating it made, and in a folder that existed before (it
// may hold a run or the user's files) what the run added to it (its lock, its Redis) is removed;
// unless keep() was called (the run is recorded in it, or another run holds its lock). Declared
// before the private Redis, so that it goes after that Redis has stopped.
class NewFolderGuard {
 public:
  // Call before creating `path`.
  explicit NewFolderGuard(const std::string& path);
  ~NewFolderGuard();
  NewFolderGuard(const NewFolderGuard&) = delete;
  NewFolderGuard& operator=(const NewFolderGuard&) = delete;
  void keep() { armed_ = false; }

 private:
  std::string path_;
  bool armed_;
  bool existed_ = false;
  std::set<std::string> existing_;  // a folder that existed: its entries when the run began
};

// Asks a private redis-server that a dead run left serving <dir>/redis.sock to SHUTDOWN (it
// writes what it acknowledged to its AOF and removes the socket); OK when nothing listens.
Status stop_stale_redis(const std::string& dir);

// Connects to Redis, waiting while it answers LOADING (a redis-server restarted from its AOF
// accepts connections before it has read the file back).
Result<redis::RedisClient> connect_when_loaded(const redis::RedisOptions& options);

}  // namespace kiln::cli
