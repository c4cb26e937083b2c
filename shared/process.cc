// run_process: posix_spawn, one pipe for stdout+stderr, a poll loop with a deadline.
#include "shared/process.h"
#include "shared/text.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

extern char** environ;

namespace kiln {
namespace {

constexpr size_t kMaxLogBytes = size_t{1} << 20;  // template error storms can be megabytes
constexpr std::chrono::milliseconds kPollSlice{50};

}  // namespace

// Runs argv[0] (looked up in PATH) with stdin from /dev/null and stdout+stderr into one pipe, in
// a process group of its own so a timeout kills the driver and its cc1plus/as/ld together.
// posix_spawn rather than fork: compile pools call this from many threads, and between fork and
// exec a multi-threaded child may only make async-signal-safe calls. No shell is involved, so
// defines and paths need no quoting.
Result<ProcessResult> run_process(const std::vector<std::string>& argv,
                                  std::chrono::milliseconds timeout) {
  int fds[2];
  // O_CLOEXEC: another thread's concurrent spawn must not inherit this pipe, or our reader would
  // wait for that unrelated child to exit before seeing end-of-file.
  if (pipe2(fds, O_CLOEXEC) != 0) return internal_error("pipe2: " + errno_text(errno));

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 2);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t empty_mask, default_signals;
  sigemptyset(&empty_mask);
  sigemptyset(&default_signals);
  sigaddset(&default_signals, SIGPIPE);  // a daemon that ignores SIGPIPE must not pass that on
  posix_spawnattr_setsigmask(&attr, &empty_mask);
  posix_spawnattr_setsigdefault(&attr, &default_signals);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr,
                           POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  int spawn_error = posix_spawnp(&pid, args[0], &actions, &attr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  close(fds[1]);
  if (spawn_error != 0) {
    close(fds[0]);
    return Status(spawn_error == ENOENT ? StatusCode::kNotFound : StatusCode::kUnavailable,
                  "starting '" + argv[0] + "': " + errno_text(spawn_error));
  }

  ProcessResult result;
  bool truncated = false, eof = false, exited = false;
  int wait_status = 0;
  char buffer[8192];
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    if (!eof) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      pollfd p{fds[0], POLLIN, 0};
      int ready = poll(&p, 1, static_cast<int>(std::clamp(left, std::chrono::milliseconds(0),
                                                           kPollSlice).count()));
      if (ready > 0) {
        ssize_t got = read(fds[0], buffer, sizeof(buffer));
        if (got > 0) {
          size_t room = kMaxLogBytes - std::min(kMaxLogBytes, result.output.size());
          result.output.append(buffer, std::min(room, static_cast<size_t>(got)));
          truncated = truncated || static_cast<size_t>(got) > room;
        } else if (got == 0 || (errno != EINTR && errno != EAGAIN)) {
          eof = true;
        }
      } else if (ready < 0 && errno != EINTR) {
        eof = true;
      }
    }
    if (!exited) {
      pid_t w = waitpid(pid, &wait_status, WNOHANG);
      if (w == pid) {
        exited = true;
        result.status_known = true;
      } else if (w < 0 && errno == ECHILD) {
        exited = true;
      }
    }
    if (exited && eof) break;
    if (std::chrono::steady_clock::now() >= deadline) {
      kill(-pid, SIGKILL);
      if (!exited) result.status_known = waitpid(pid, &wait_status, 0) == pid;
      result.timed_out = true;
      break;
    }
    if (eof) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  close(fds[0]);
  if (result.status_known && WIFEXITED(wait_status)) result.exit_code = WEXITSTATUS(wait_status);
  if (result.status_known && WIFSIGNALED(wait_status)) result.term_signal = WTERMSIG(wait_status);
  if (truncated) result.output += "\n[kiln: output truncated]\n";
  return result;
}

}  // namespace kiln
