// run_forked: fork, run, wait on a pidfd (or poll waitpid where the kernel has none), report.
#include "evaluator/forked_call.h"

#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <new>
#include <thread>

#include "shared/child_process.h"
#include "shared/text.h"

namespace kiln::eval {
namespace {

// What the child reports through a shared page: how `call` ended, and a thrown message.
struct ChildReport {
  enum State : int { kRunning = 0, kReturned = 1, kThrew = 2 };
  volatile int state;
  char message[4000];
};

[[noreturn]] void child_main(const std::function<void()>& call, ChildReport* report) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  dup2(STDERR_FILENO, STDOUT_FILENO);
  try {
    call();
    report->state = ChildReport::kReturned;
  } catch (const std::exception& e) {
    std::strncpy(report->message, e.what(), sizeof(report->message) - 1);
    report->state = ChildReport::kThrew;
  } catch (...) {
    std::strncpy(report->message, "an exception that is not a std::exception",
                 sizeof(report->message) - 1);
    report->state = ChildReport::kThrew;
  }
  _exit(0);
}

// Waits until `pid` ends or `deadline` passes; true when it ended. *known: whether *status
// holds how (not where the child was reaped elsewhere: SIGCHLD ignored).
bool wait_for(pid_t pid, std::chrono::steady_clock::time_point deadline, int* status, bool* known) {
  const int pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  auto pause = std::chrono::microseconds(100);
  while (true) {
    const pid_t got = waitpid(pid, status, WNOHANG);
    *known = got == pid;
    if (got == pid || (got < 0 && errno != EINTR)) break;
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) {
      if (pidfd >= 0) close(pidfd);
      return false;
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now);
    if (pidfd >= 0) {
      pollfd p{pidfd, POLLIN, 0};
      poll(&p, 1, static_cast<int>(std::min<long long>(left.count() + 1, 1000)));
    } else {  // no pidfd (Linux before 5.3): poll waitpid, backing off to 10 ms
      std::this_thread::sleep_for(std::min<std::chrono::microseconds>(pause, left));
      pause = std::min<std::chrono::microseconds>(pause * 2, std::chrono::milliseconds(10));
    }
  }
  if (pidfd >= 0) close(pidfd);
  return true;
}

}  // namespace

Status run_forked(const std::function<void()>& call, std::chrono::milliseconds deadline,
                  const std::string& what) {
  void* page =
      mmap(nullptr, sizeof(ChildReport), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (page == MAP_FAILED)
    return unavailable(what + ": no memory to start it: " + errno_text(errno));
  auto* report = new (page) ChildReport{};
  const auto until = std::chrono::steady_clock::now() + deadline;
  // A child that calls exit() flushes the stdio buffers it inherited: empty them first, or what
  // this process had yet to write would be written twice.
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid == 0) child_main(call, report);
  if (pid < 0) {
    const int err = errno;
    munmap(page, sizeof(ChildReport));
    return unavailable(what + ": cannot start a process for it: " + errno_text(err));
  }
  int wstatus = 0;
  bool known = false;
  const bool ended = wait_for(pid, until, &wstatus, &known);
  if (!ended) {
    kill(pid, SIGKILL);
    while (waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
    }
  }
  const int state = report->state;
  const std::string message(report->message, strnlen(report->message, sizeof(report->message)));
  munmap(page, sizeof(ChildReport));
  if (!ended) {
    char secs[32];
    std::snprintf(secs, sizeof(secs), "%g", static_cast<double>(deadline.count()) / 1000.0);
    return deadline_exceeded(what + " did not return within " + secs + " s and was stopped");
  }
  if (state == ChildReport::kReturned) return Status::ok();
  if (state == ChildReport::kThrew) {  // a message that names the call already stands alone
    return internal_error(message.rfind(what, 0) == 0 ? message : what + " threw: " + message);
  }
  if (!known) return internal_error(what + " ended without returning (how is unknown)");
  ExitStatus how;
  if (WIFEXITED(wstatus)) how.exit_code = WEXITSTATUS(wstatus);
  if (WIFSIGNALED(wstatus)) how.term_signal = WTERMSIG(wstatus);
  if (how.term_signal != 0) return internal_error(what + " crashed (" + how.describe() + ")");
  return internal_error(what + " ended its process (" + how.describe() +
                        ", through exit() or the like) instead of returning");
}

}  // namespace kiln::eval
