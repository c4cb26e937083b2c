// Long-running child processes (a redis-server, evaluator daemons, a profiled program): the one
// way kiln starts and stops them. Start with ChildProcess::spawn, watch with running(), stop with
// stop() (SIGTERM, a grace period, then SIGKILL) or let the destructor do it. Programs run to
// completion with captured output (compilers, probes) use run_process (shared/process.h); the
// evaluator's sandbox child has its own fork (evaluator/sandbox.cc: it must set up the arena
// before exec).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "shared/status.h"

namespace kiln {

struct SpawnOptions {
  std::vector<std::string> argv;  // argv[0]: a path, or a name looked up in PATH
  // The child's environment; empty: this process's own.
  std::vector<std::string> env;
  // stdout and stderr appended to this file (created 0644); empty: inherited from this process.
  std::string output_file;
  // A process group of its own: Ctrl-C in the terminal reaches kiln, which stops the child in
  // order, instead of killing both at once.
  bool new_process_group = false;
  // SIGTERM to the child when this process dies, however it dies (Linux PR_SET_PDEATHSIG): a
  // coordinator killed with SIGKILL leaves no evaluator behind.
  bool die_with_parent = false;
};

// How a child ended.
struct ExitStatus {
  int exit_code = -1;   // when it exited
  int term_signal = 0;  // when a signal ended it
  bool ok() const { return term_signal == 0 && exit_code == 0; }
  // "exited with status 3", "killed by signal 9 (Killed)".
  std::string describe() const;
};

class ChildProcess {
 public:
  // Starts the child; every signal has its default disposition and none is blocked in it.
  // UNAVAILABLE naming the program when it cannot be started (not found, not executable, the
  // output file cannot be opened).
  static Result<ChildProcess> spawn(const SpawnOptions& options);

  ChildProcess(ChildProcess&& other) noexcept;
  ChildProcess& operator=(ChildProcess&& other) noexcept;
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;
  ~ChildProcess();  // stop()

  pid_t pid() const { return pid_; }
  const std::string& program() const { return program_; }

  // Whether it still runs. Once it has ended it is reaped and exit_status() says how.
  bool running();
  const std::optional<ExitStatus>& exit_status() const { return status_; }

  // Blocks until it ends.
  ExitStatus wait();

  // SIGTERM, up to `grace` for it to end, then SIGKILL; reaps it. Does nothing once it ended.
  void stop(std::chrono::milliseconds grace = std::chrono::seconds(5));

  // SIGKILL (no chance to clean up: a crash, for fault tests) and reaps it.
  void kill_now();

  // Sends `signal` (SIGKILL, SIGSTOP, ...) while it runs, without waiting.
  void signal(int signal) const;

 private:
  ChildProcess(pid_t pid, std::string program) : pid_(pid), program_(std::move(program)) {}
  void reaped(int wait_status);

  pid_t pid_ = -1;
  std::string program_;
  std::optional<ExitStatus> status_;
};

}  // namespace kiln
