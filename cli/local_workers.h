// The worker processes `kiln run` starts on this machine (one evaluator per GPU, or --evaluators
// of them on the cpu backend; an LLM agent), kept alive for the whole run: one that dies is
// started again after a back-off (1 s, doubling up to a minute; back to 1 s once a process has
// run for a minute), and each restart is said on stderr with how the process ended (after an
// exit with an error status, with the last line of its log: the reason it gave).
#pragma once

#include <chrono>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "shared/child_process.h"
#include "shared/status.h"

namespace kiln::cli {

class LocalWorkers {
 public:
  // `who` prefixes the lines printed ("kiln run"); `pid_file` (may be empty) lists the evaluators'
  // pids, one per line, rewritten on every restart (operators and fault tests read it).
  LocalWorkers(std::string who, std::string pid_file, FILE* out = stderr);

  // Starts one worker; `name` ("evaluator 0", "LLM agent") names it in messages, `evaluator`
  // says whether its pid goes in the pid file.
  Status start(std::string name, std::vector<std::string> argv, std::string log_file,
               bool evaluator);

  // Call about once a second: restarts the workers that died and whose back-off is over.
  void supervise();

  // Stops every worker (SIGTERM, then SIGKILL after the grace period).
  void stop_all();

  size_t size() const { return slots_.size(); }
  uint64_t restarts() const { return restarts_; }
  std::vector<pid_t> evaluator_pids() const;

 private:
  struct Slot {
    std::string name;
    SpawnOptions spawn;
    bool evaluator = false;
    std::optional<ChildProcess> child;
    std::chrono::steady_clock::time_point started;
    std::chrono::steady_clock::time_point restart_at;  // set while it waits out its back-off
    std::chrono::seconds backoff{1};
    bool waiting = false;
  };
  void write_pids() const;

  std::string who_;
  std::string pid_file_;
  FILE* out_;
  std::vector<Slot> slots_;
  uint64_t restarts_ = 0;
};

}  // namespace kiln::cli
