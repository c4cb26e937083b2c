// ChildProcess: fork + execve with everything the child needs prepared before the fork (between
// fork and exec only async-signal-safe calls are allowed in a threaded parent).
#include "shared/child_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <thread>

#include "shared/text.h"

extern char** environ;

namespace kiln {
namespace {

// argv[0] as a path: itself when it names one, else the first executable match in PATH.
std::string resolve(const std::string& program) {
  if (program.find('/') != std::string::npos) return program;
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/local/bin:/usr/bin:/bin";
  size_t start = 0;
  while (start <= dirs.size()) {
    size_t end = dirs.find(':', start);
    if (end == std::string::npos) end = dirs.size();
    std::string dir = dirs.substr(start, end - start);
    std::string candidate = (dir.empty() ? "." : dir) + "/" + program;
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
    start = end + 1;
  }
  return "";
}

}  // namespace

std::string ExitStatus::describe() const {
  if (term_signal != 0) {
    const char* name = strsignal(term_signal);
    return "killed by signal " + std::to_string(term_signal) +
           (name ? std::string(" (") + name + ")" : "");
  }
  return "exited with status " + std::to_string(exit_code);
}

Result<ChildProcess> ChildProcess::spawn(const SpawnOptions& o) {
  if (o.argv.empty()) return invalid_argument("no program to start");
  const std::string path = resolve(o.argv[0]);
  if (path.empty() || access(path.c_str(), X_OK) != 0) {
    return unavailable("cannot start '" + o.argv[0] + "': not found or not executable" +
                       (path.empty() ? " (looked in PATH)" : ""));
  }
  std::vector<char*> argv;
  for (const auto& a : o.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (const auto& e : o.env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  char** env = o.env.empty() ? environ : envp.data();
  int out = -1;
  if (!o.output_file.empty()) {
    out = open(o.output_file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (out < 0) return unavailable("opening " + o.output_file + ": " + errno_text(errno));
  }
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) {
    const int err = errno;
    if (out >= 0) close(out);
    return unavailable("starting " + o.argv[0] + ": " + errno_text(err));
  }
  if (pid == 0) {
    if (o.new_process_group) setpgid(0, 0);
    if (o.die_with_parent && (prctl(PR_SET_PDEATHSIG, SIGTERM) != 0 || getppid() != parent))
      _exit(127);
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    for (int s = 1; s < NSIG; ++s)
      sigaction(s, &dfl, nullptr);  // fails harmlessly for SIGKILL/SIGSTOP
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    if (out >= 0 && (dup2(out, STDOUT_FILENO) < 0 || dup2(out, STDERR_FILENO) < 0)) _exit(127);
    execve(path.c_str(), argv.data(), env);
    _exit(127);
  }
  if (out >= 0) close(out);
  return ChildProcess(pid, o.argv[0]);
}

ChildProcess::ChildProcess(ChildProcess&& other) noexcept
    : pid_(std::exchange(other.pid_, -1)),
      program_(std::move(other.program_)),
      status_(other.status_) {}

ChildProcess& ChildProcess::operator=(ChildProcess&& other) noexcept {
  if (this != &other) {
    stop();
    pid_ = std::exchange(other.pid_, -1);
    program_ = std::move(other.program_);
    status_ = other.status_;
  }
  return *this;
}

ChildProcess::~ChildProcess() { stop(); }

void ChildProcess::reaped(int wait_status) {
  ExitStatus s;
  if (WIFEXITED(wait_status)) s.exit_code = WEXITSTATUS(wait_status);
  if (WIFSIGNALED(wait_status)) s.term_signal = WTERMSIG(wait_status);
  status_ = s;
}

bool ChildProcess::running() {
  if (pid_ <= 0 || status_) return false;
  int ws = 0;
  const pid_t got = waitpid(pid_, &ws, WNOHANG);
  if (got == pid_) {
    reaped(ws);
    return false;
  }
  if (got < 0 && errno == ECHILD) {  // reaped elsewhere (SIGCHLD ignored): how it ended is unknown
    status_ = ExitStatus{};
    return false;
  }
  return true;
}

ExitStatus ChildProcess::wait() {
  if (pid_ > 0 && !status_) {
    int ws = 0;
    pid_t got;
    while ((got = waitpid(pid_, &ws, 0)) < 0 && errno == EINTR) {
    }
    if (got == pid_)
      reaped(ws);
    else
      status_ = ExitStatus{};
  }
  return status_.value_or(ExitStatus{});
}

void ChildProcess::stop(std::chrono::milliseconds grace) {
  if (!running()) return;
  ::kill(pid_, SIGCONT);  // a stopped child cannot act on SIGTERM
  ::kill(pid_, SIGTERM);
  const auto deadline = std::chrono::steady_clock::now() + grace;
  while (std::chrono::steady_clock::now() < deadline) {
    if (!running()) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ::kill(pid_, SIGKILL);
  wait();
}

void ChildProcess::kill_now() {
  if (!running()) return;
  ::kill(pid_, SIGKILL);
  wait();
}

void ChildProcess::signal(int signal) const {
  if (pid_ > 0 && !status_) ::kill(pid_, signal);
}

}  // namespace kiln
