// The sandbox's parent side: spawning `kiln __sandbox`, the one-line-per-call protocol with its
// watchdog, and turning a dead child into a Status that says how it died.
//
// Process hygiene, in one place:
// - SIGPIPE: the child's stdin is one end of a socketpair and every send uses MSG_NOSIGNAL, so a
//   dead child is an EPIPE here, never a signal. No signal disposition of this process is changed.
// - SIGCHLD must not be ignored by the owner (SIG_IGN auto-reaps children and waitpid could then
//   not say how the child died; such a death is reported as "exit status unknown").
// - The child gets PR_SET_PDEATHSIG(SIGKILL) before exec, so a dead parent leaves no orphan that
//   holds the GPU. Hazard: Linux fires it when the THREAD that forked exits, not the process: spawn
//   sandboxes from a thread that lives as long as they do.
// - The child runs in its own process group, so a terminal's Ctrl-C reaches only the parent, which
//   then decides how the child ends.
// Not thread-safe: one thread owns a Sandbox and makes its calls.
#include "evaluator/sandbox.h"
#include "shared/text.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

namespace kiln::eval {
namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t kStderrTailBytes = 4096;
constexpr size_t kMaxReplyBytes = 8 << 20;  // a reply is a few KB; more means a broken child
constexpr uint32_t kExitGraceMs = 2000;     // a child that announced its exit gets this long
constexpr uint32_t kEofGraceMs = 500;       // a child whose stdout closed is dying (or broken)

// Descriptor numbers in the child, fixed so the command line can name the arena's.
constexpr int kChildArenaFd = 3;
constexpr int kChildExecReportFd = 4;  // close-on-exec; carries errno when exec fails

// Owns one descriptor on the error paths of spawn.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  ~UniqueFd() { reset(); }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  int get() const { return fd_; }
  int* out() { return &fd_; }
  int release() { return std::exchange(fd_, -1); }
  void reset() {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
};

void close_fd(int& fd) {
  if (fd >= 0) close(fd);
  fd = -1;
}

Status set_nonblocking(int fd) {
  int flags = fcntl(fd, F_GETFL);
  if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0) {
    return internal_error("fcntl(O_NONBLOCK): " + errno_text(errno));
  }
  return Status::ok();
}

std::string describe_wait_status(int status) {
  if (WIFEXITED(status)) return "exited with code " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    const char* text = sigdescr_np(sig);
    return "killed by signal " + std::to_string(sig) + " (" + (text ? text : "unknown") + ")";
  }
  return "ended with wait status " + std::to_string(status);
}

// Descriptors the forked child moves into place before exec.
struct ChildFds {
  int stdin_fd, stdout_fd, stderr_fd, arena_fd, exec_report_fd;
};

// Runs between fork and exec in a copy of a multi-threaded process: only async-signal-safe calls
// (no allocation, no locks, no stdio). Every source descriptor is first moved to >= 10 so that no
// dup2 below can overwrite one that is still needed.
[[noreturn]] void exec_child(ChildFds fds, char* const argv[], pid_t parent) {
  if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent) _exit(127);
  setpgid(0, 0);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  struct sigaction default_action {};
  default_action.sa_handler = SIG_DFL;
  sigaction(SIGPIPE, &default_action, nullptr);  // an ignored SIGPIPE would survive exec

  int sources[5] = {fds.stdin_fd, fds.stdout_fd, fds.stderr_fd, fds.arena_fd, fds.exec_report_fd};
  for (int& fd : sources) {
    fd = fcntl(fd, F_DUPFD_CLOEXEC, 10);
    if (fd < 0) _exit(127);
  }
  for (int target = 0; target < 5; ++target) {
    if (dup2(sources[target], target) < 0) _exit(127);  // dup2 clears close-on-exec
  }
  fcntl(kChildExecReportFd, F_SETFD, FD_CLOEXEC);
  // Everything else the parent had open stays out of the child (a descriptor another thread made
  // without O_CLOEXEC, say). Kernels before 5.9 lack close_range; close-on-exec still holds there.
  syscall(SYS_close_range, 5U, ~0U, 0U);
  execv(argv[0], argv);
  int err = errno;
  ssize_t ignored = write(kChildExecReportFd, &err, sizeof(err));
  (void)ignored;
  _exit(127);
}

Result<std::string> make_scratch_dir() {
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern = std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") +
                        "/kiln-sandbox-XXXXXX";
  if (mkdtemp(pattern.data()) == nullptr) {
    return unavailable("creating " + pattern + ": " + errno_text(errno));
  }
  return pattern;
}

StatusCode status_code_from_name(const std::string& name) {
  for (int c = 0; c <= static_cast<int>(StatusCode::kInternal); ++c) {
    if (status_code_name(static_cast<StatusCode>(c)) == name) return static_cast<StatusCode>(c);
  }
  return StatusCode::kUnavailable;
}

}  // namespace

Result<std::unique_ptr<Sandbox>> Sandbox::spawn(const SandboxOptions& options,
                                                uint32_t start_timeout_ms) {
  const std::string what = "starting the sandbox (backend " + options.backend + ", gpu " +
                           std::to_string(options.gpu) + ")";
  std::unique_ptr<Sandbox> sandbox(new Sandbox());
  if (Status s = sandbox->start(options); !s.is_ok()) return s.with_context(what);
  auto hello = sandbox->call(nlohmann::json{{"op", "hello"}}, start_timeout_ms);
  if (!hello.is_ok()) return hello.status().with_context(what);
  const nlohmann::json& reply = *hello;
  if (!(reply.contains("ok") && reply["ok"].is_boolean() && reply["ok"].get<bool>())) {
    // The child could not open its device; it said why and with which code.
    std::string code = reply.contains("code") && reply["code"].is_string()
                           ? reply["code"].get<std::string>()
                           : std::string();
    std::string error = reply.contains("error") && reply["error"].is_string()
                            ? reply["error"].get<std::string>()
                            : reply.dump();
    return Status(status_code_from_name(code), what + ": " + error);
  }
  for (const char* key : {"device", "arch", "backend"}) {
    if (!reply.contains(key) || !reply[key].is_string()) {
      return internal_error(what + ": hello reply lacks string field '" + key + "': " +
                            reply.dump());
    }
  }
  sandbox->device_name_ = reply["device"];
  sandbox->arch_ = reply["arch"];
  sandbox->backend_ = reply["backend"];
  return sandbox;
}

Status Sandbox::start(const SandboxOptions& options) {
  if (options.kiln_binary.empty()) return invalid_argument("no kiln binary given");
  KILN_ASSIGN_OR_RETURN(arena_, Arena::create(options.arena_bytes));
  KILN_ASSIGN_OR_RETURN(scratch_dir_, make_scratch_dir());

  int stdin_pair[2], stdout_pipe[2], stderr_pipe[2], report_pipe[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, stdin_pair) != 0) {
    return unavailable("socketpair: " + errno_text(errno));
  }
  UniqueFd stdin_parent(stdin_pair[0]), stdin_child(stdin_pair[1]);
  UniqueFd stdout_parent, stdout_child, stderr_parent, stderr_child, report_parent, report_child;
  for (auto [p, parent, child] : {std::tuple{stdout_pipe, &stdout_parent, &stdout_child},
                                  std::tuple{stderr_pipe, &stderr_parent, &stderr_child},
                                  std::tuple{report_pipe, &report_parent, &report_child}}) {
    if (pipe2(p, O_CLOEXEC) != 0) return unavailable("pipe2: " + errno_text(errno));
    *parent->out() = p[0];
    *child->out() = p[1];
  }

  // Everything exec needs is built before fork: the child may not allocate.
  std::vector<std::string> args = {options.kiln_binary,
                                   "__sandbox",
                                   "--backend",
                                   options.backend,
                                   "--gpu",
                                   std::to_string(options.gpu),
                                   "--arena-fd",
                                   std::to_string(kChildArenaFd),
                                   "--arena-bytes",
                                   std::to_string(arena_.bytes()),
                                   "--scratch-dir",
                                   scratch_dir_};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  ChildFds fds{stdin_child.get(), stdout_child.get(), stderr_child.get(), arena_.fd(),
               report_child.get()};
  pid_t parent = getpid();

  pid_t pid = fork();
  if (pid < 0) return unavailable("fork: " + errno_text(errno));
  if (pid == 0) exec_child(fds, argv.data(), parent);
  pid_ = pid;
  stdin_child.reset();
  stdout_child.reset();
  stderr_child.reset();
  report_child.reset();
  to_child_ = stdin_parent.release();
  from_child_ = stdout_parent.release();
  stderr_fd_ = stderr_parent.release();

  // EOF on the report pipe means exec succeeded (close-on-exec closed it); an int means errno.
  int exec_errno = 0;
  ssize_t n;
  do {
    n = read(report_parent.get(), &exec_errno, sizeof(exec_errno));
  } while (n < 0 && errno == EINTR);
  if (n > 0) {
    reap(0);
    return unavailable("exec " + options.kiln_binary + ": " + errno_text(exec_errno));
  }
  for (int fd : {to_child_, from_child_, stderr_fd_}) {
    if (Status s = set_nonblocking(fd); !s.is_ok()) {
      reap(0);
      return s;
    }
  }
  return Status::ok();
}

Sandbox::~Sandbox() {
  if (pid_ > 0) reap(0);
  close_fd(to_child_);
  close_fd(from_child_);
  close_fd(stderr_fd_);
  if (!scratch_dir_.empty()) {
    std::error_code ignored;
    std::filesystem::remove_all(scratch_dir_, ignored);
  }
}

void Sandbox::kill_child() {
  if (pid_ > 0) reap(0);
}

void Sandbox::drain_stderr() {
  // Bounded per call, so a child that floods stderr cannot starve the watchdog.
  char buffer[16384];
  for (int i = 0; i < 64 && stderr_fd_ >= 0; ++i) {
    ssize_t n = read(stderr_fd_, buffer, sizeof(buffer));
    if (n > 0) {
      stderr_tail_.append(buffer, static_cast<size_t>(n));
      if (stderr_tail_.size() > kStderrTailBytes) {
        stderr_tail_.erase(0, stderr_tail_.size() - kStderrTailBytes);
      }
    } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
      close_fd(stderr_fd_);  // EOF: the child (and everything it started) closed it
    } else if (errno == EAGAIN) {
      return;
    }
  }
}

std::string Sandbox::reap(uint32_t grace_ms) {
  if (pid_ <= 0) return "was not running";
  const std::string who = "sandbox child (pid " + std::to_string(pid_) + ")";
  const auto deadline = Clock::now() + std::chrono::milliseconds(grace_ms);
  int status = 0;
  pid_t r = 0;
  while (true) {
    r = waitpid(pid_, &status, WNOHANG);
    if (r != 0 && !(r < 0 && errno == EINTR)) break;
    if (Clock::now() >= deadline) break;
    drain_stderr();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  std::string how;
  if (r == 0) {
    // Hazard: a process stuck in the GPU driver may take a while to die; waitpid blocks until then.
    kill(pid_, SIGKILL);
    do {
      r = waitpid(pid_, &status, 0);
    } while (r < 0 && errno == EINTR);
    how = grace_ms > 0 ? "did not exit within " + std::to_string(grace_ms) + " ms and was killed"
                       : "was killed";
  } else if (r < 0) {
    how = "ended (exit status unknown: " + errno_text(errno) + ")";
  } else {
    how = describe_wait_status(status);
  }
  pid_ = -1;
  drain_stderr();  // what the child wrote just before it died: the crash report's best part
  close_fd(to_child_);
  close_fd(from_child_);
  close_fd(stderr_fd_);
  read_buffer_.clear();
  if (!scratch_dir_.empty()) {
    std::error_code ignored;
    std::filesystem::remove_all(scratch_dir_, ignored);
    scratch_dir_.clear();
  }
  ended_ = who + " " + how;
  return ended_;
}

Status Sandbox::child_failure(StatusCode code, const std::string& what, uint32_t grace_ms) {
  std::string message = what + ": " + reap(grace_ms);
  if (!stderr_tail_.empty()) message += "; its stderr ends with:\n" + stderr_tail_;
  return Status(code, std::move(message));
}

Result<nlohmann::json> Sandbox::call(const nlohmann::json& request, uint32_t timeout_ms) {
  std::string phase = "request";
  if (request.is_object() && request.contains("op") && request["op"].is_string()) {
    phase = request["op"].get<std::string>();
  }
  const std::string where = "sandbox phase '" + phase + "'";
  if (pid_ <= 0) {
    return unavailable(where + ": no sandbox child is running (" +
                       (ended_.empty() ? std::string("never started") : ended_) +
                       "); spawn a new sandbox");
  }
  std::string line;
  try {
    line = request.dump();
  } catch (const nlohmann::json::exception& e) {
    return invalid_argument(where + ": request cannot be serialized: " + e.what());
  }
  line += '\n';

  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  size_t sent = 0;
  drain_stderr();
  while (true) {
    if (sent == line.size()) {
      size_t newline = read_buffer_.find('\n');
      if (newline != std::string::npos) break;
    } else if (!read_buffer_.empty()) {
      reap(0);
      return internal_error(where + ": the sandbox child wrote to stdout outside a reply; child "
                            "killed");
    }
    if (read_buffer_.size() > kMaxReplyBytes) {
      reap(0);
      return internal_error(where + ": reply longer than " + std::to_string(kMaxReplyBytes) +
                            " bytes; child killed");
    }
    auto left_ms = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left_ms <= 0) {
      reap(0);
      return deadline_exceeded(where + " exceeded " + std::to_string(timeout_ms) +
                               " ms; child killed");
    }
    pollfd fds[3] = {{from_child_, POLLIN, 0},
                     {stderr_fd_, POLLIN, 0},  // -1 once closed: poll skips it
                     {sent < line.size() ? to_child_ : -1, POLLOUT, 0}};
    int ready = poll(fds, 3, static_cast<int>(std::min<int64_t>(left_ms, INT_MAX)));
    if (ready < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      reap(0);
      return internal_error(where + ": poll: " + errno_text(err) + "; child killed");
    }
    if (fds[1].revents != 0) drain_stderr();
    if (fds[2].revents != 0) {
      ssize_t n = send(to_child_, line.data() + sent, line.size() - sent,
                       MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) {
        sent += static_cast<size_t>(n);
      } else if (n < 0 && errno != EAGAIN && errno != EINTR) {
        return child_failure(StatusCode::kUnavailable,
                             where + ": sending the request failed (" + errno_text(errno) + ")",
                             kEofGraceMs);
      }
    }
    if (fds[0].revents != 0) {
      char buffer[65536];
      ssize_t n = read(from_child_, buffer, sizeof(buffer));
      if (n > 0) {
        read_buffer_.append(buffer, static_cast<size_t>(n));
      } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
        return child_failure(StatusCode::kUnavailable, where, kEofGraceMs);
      }
    }
  }

  size_t newline = read_buffer_.find('\n');
  std::string reply_line = read_buffer_.substr(0, newline);
  read_buffer_.erase(0, newline + 1);
  if (!read_buffer_.empty()) {
    reap(0);
    return internal_error(where + ": the sandbox child sent more than one line; child killed");
  }
  nlohmann::json reply = nlohmann::json::parse(reply_line, nullptr, /*allow_exceptions=*/false);
  if (reply.is_discarded() || !reply.is_object()) {
    reap(0);
    return internal_error(where + ": reply is not a JSON object (" + reply_line.substr(0, 200) +
                          "); child killed");
  }
  // A fatal reply or the reply to "exit" announces that the child is ending: reap it now, so
  // alive() turns false and the owner respawns.
  auto fatal = reply.find("fatal");
  if (phase == "exit" || (fatal != reply.end() && fatal->is_boolean() && fatal->get<bool>())) {
    reap(kExitGraceMs);
  }
  return reply;
}

}  // namespace kiln::eval
