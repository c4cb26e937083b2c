// See local_workers.h.
#include "cli/local_workers.h"

#include <signal.h>

#include <algorithm>
#include <cctype>
#include <fstream>

#include "shared/text.h"

namespace kiln::cli {
namespace {

using Clock = std::chrono::steady_clock;
constexpr std::chrono::seconds kMaxBackoff{60};
constexpr std::chrono::seconds kHealthyAfter{60};  // a process up this long resets its back-off

// The last non-empty line of the file at `path`, read from at most its last 4 KB, made safe for
// one line of kiln's output and cut to 240 bytes (log_safe); empty when there is none. A worker
// that exits with an error says why on its last line ("worker id 'gpu0' is in use by ...").
std::string last_line(const std::string& path) {
  constexpr std::streamoff kTail = 4096;
  std::ifstream f(path, std::ios::binary);
  if (!f || !f.seekg(0, std::ios::end)) return "";
  const std::streamoff size = f.tellg();
  if (size <= 0) return "";
  const std::streamoff from = std::max<std::streamoff>(0, size - kTail);
  std::string tail(static_cast<size_t>(size - from), '\0');
  f.seekg(from);
  f.read(tail.data(), static_cast<std::streamsize>(tail.size()));
  tail.resize(static_cast<size_t>(std::max<std::streamsize>(0, f.gcount())));
  while (!tail.empty() && std::isspace(static_cast<unsigned char>(tail.back()))) tail.pop_back();
  const size_t nl = tail.find_last_of('\n');
  return log_safe(nl == std::string::npos ? tail : tail.substr(nl + 1), 240);
}

}  // namespace

LocalWorkers::LocalWorkers(std::string who, std::string pid_file, FILE* out)
    : who_(std::move(who)), pid_file_(std::move(pid_file)), out_(out) {}

Status LocalWorkers::start(std::string name, std::vector<std::string> argv, std::string log_file,
                           bool evaluator) {
  Slot s;
  s.name = std::move(name);
  s.spawn.argv = std::move(argv);
  s.spawn.output_file = std::move(log_file);
  s.spawn.die_with_parent = true;
  s.evaluator = evaluator;
  KILN_ASSIGN_OR_RETURN(ChildProcess child, ChildProcess::spawn(s.spawn));
  s.child.emplace(std::move(child));
  s.started = Clock::now();
  slots_.push_back(std::move(s));
  write_pids();
  return Status::ok();
}

void LocalWorkers::supervise() {
  const auto now = Clock::now();
  bool changed = false;
  for (Slot& s : slots_) {
    if (!s.waiting) {
      if (s.child && s.child->running()) continue;
      const std::optional<ExitStatus> status = s.child ? s.child->exit_status() : std::nullopt;
      std::string how = status ? status->describe() : "ended";
      // An exit with an error status says why on its log's last line. A killed process's last
      // line is whatever it was doing, so it is left out, unless it is kiln's own last word
      // ("kiln: ...", as a crashing reference leaves it: evaluator/reference_watch.h).
      if (status && (status->exit_code > 0 || status->term_signal != 0)) {
        const std::string why = last_line(s.spawn.output_file);
        if (!why.empty() && (status->term_signal == 0 || why.rfind("kiln: ", 0) == 0))
          how += " (its log ends: \"" + why + "\")";
      }
      if (now - s.started >= kHealthyAfter) s.backoff = std::chrono::seconds(1);
      std::fprintf(out_, "%s: %s (pid %d) %s; starting it again in %lld s (log %s)\n", who_.c_str(),
                   s.name.c_str(), s.child ? s.child->pid() : -1, how.c_str(),
                   static_cast<long long>(s.backoff.count()), s.spawn.output_file.c_str());
      s.child.reset();
      s.waiting = true;
      s.restart_at = now + s.backoff;
      s.backoff = std::min(s.backoff * 2, kMaxBackoff);
      continue;
    }
    if (now < s.restart_at) continue;
    Result<ChildProcess> child = ChildProcess::spawn(s.spawn);
    if (!child.is_ok()) {
      std::fprintf(out_, "%s: starting %s again failed: %s; next try in %lld s\n", who_.c_str(),
                   s.name.c_str(), child.status().message().c_str(),
                   static_cast<long long>(s.backoff.count()));
      s.restart_at = now + s.backoff;
      s.backoff = std::min(s.backoff * 2, kMaxBackoff);
      continue;
    }
    s.child.emplace(std::move(child).value());
    s.started = now;
    s.waiting = false;
    ++restarts_;
    changed = true;
    std::fprintf(out_, "%s: %s started again (pid %d, restart %llu of this run)\n", who_.c_str(),
                 s.name.c_str(), s.child->pid(), static_cast<unsigned long long>(restarts_));
  }
  if (changed) write_pids();
}

void LocalWorkers::stop_all() {
  // SIGTERM to all first, so they wind down together, then wait for each.
  for (Slot& s : slots_) {
    if (s.child && s.child->running()) s.child->signal(SIGTERM);
  }
  for (Slot& s : slots_) {
    if (s.child) s.child->stop();
  }
}

std::vector<pid_t> LocalWorkers::evaluator_pids() const {
  std::vector<pid_t> pids;
  for (const Slot& s : slots_) {
    if (s.evaluator && s.child) pids.push_back(s.child->pid());
  }
  return pids;
}

void LocalWorkers::write_pids() const {
  if (pid_file_.empty()) return;
  const std::string tmp = pid_file_ + ".tmp";
  {
    std::ofstream f(tmp);
    for (pid_t p : evaluator_pids()) f << p << "\n";
  }
  std::rename(tmp.c_str(), pid_file_.c_str());
}

}  // namespace kiln::cli
