// SIGINT and SIGTERM as a request to stop, for the commands that run until told to: `kiln
// evaluator`, `kiln agent`, `kiln run` / `kiln coordinator` and `kiln eval --sweep`.
#pragma once

#include <signal.h>

#include <atomic>

namespace kiln::cli {

// While one lives, SIGINT and SIGTERM set a flag that the command's loop polls, so the work in
// progress finishes and what was found is still written; when it goes, the handlers installed
// before it come back (a second Ctrl-C during the shutdown that follows then ends the process as
// usual). One at a time per process: the flag is static storage, the only thing a signal handler
// may touch, and it stays set after the guard goes so that the command can say it was stopped.
class StopOnSignal {
 public:
  // Whether a system call the signal interrupts resumes (kRestart) or fails with EINTR
  // (kInterrupt: a daemon blocked in a poll wakes at once and sees the flag).
  enum class Syscalls { kRestart, kInterrupt };
  explicit StopOnSignal(Syscalls syscalls = Syscalls::kRestart);
  ~StopOnSignal();
  StopOnSignal(const StopOnSignal&) = delete;
  StopOnSignal& operator=(const StopOnSignal&) = delete;

  // The flag, for loops that take a `const std::atomic<bool>&` stop.
  static const std::atomic<bool>& flag();
  static bool requested() { return flag().load(); }

 private:
  struct sigaction old_int_ {
  }, old_term_{};
};

}  // namespace kiln::cli
