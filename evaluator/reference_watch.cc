// The watch's slots, its signal and exit hooks and its deadline thread, installed on first use.
#include "evaluator/reference_watch.h"

#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>

#include "shared/text.h"

namespace kiln::eval {
namespace {

constexpr size_t kTextBytes = 480;
constexpr int kSignals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};

// A call being watched. `deadline_ns` is also the slot's state: 0 free, -1 being filled, else
// the steady-clock time the call must end by. Read from signal handlers: plain memory only.
struct Slot {
  std::atomic<int64_t> deadline_ns{0};
  int64_t deadline_ms = 0;
  pid_t thread = 0;  // the calling thread: a crash or exit() elsewhere is not the reference's
  char text[kTextBytes] = {};
};
Slot g_slots[WatchedReferenceCall::kMaxWatched];
struct sigaction g_previous[sizeof(kSignals) / sizeof(kSignals[0])];

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void put(const char* s) {
  const ssize_t ignored = write(STDERR_FILENO, s, std::strlen(s));
  (void)ignored;
}

pid_t this_thread() { return static_cast<pid_t>(syscall(SYS_gettid)); }

// Writes "kiln: <what><how><number><tail>" for the call this thread is in, if any (number < 0:
// none). Async-signal-safe.
bool say_mine(const char* how, int64_t number, const char* tail) {
  const pid_t me = this_thread();
  for (Slot& s : g_slots) {
    if (s.deadline_ns.load(std::memory_order_acquire) <= 0 || s.thread != me) continue;
    char digits[24];
    int n = 0;
    uint64_t v = number < 0 ? 0 : static_cast<uint64_t>(number);
    do digits[n++] = static_cast<char>('0' + v % 10);
    while ((v /= 10) != 0 && n < 23);
    char reversed[24];
    for (int i = 0; i < n; ++i) reversed[i] = digits[n - 1 - i];
    reversed[n] = '\0';
    put("kiln: ");
    put(s.text);
    put(how);
    if (number >= 0) put(reversed);
    put(tail);
    return true;
  }
  return false;
}

void on_fatal_signal(int sig) {
  say_mine(" crashed (signal ", sig,
           "): the target's reference is broken; `kiln targets --check TARGET` runs it alone\n");
  // Then the previous handling (by default: the process ends by this signal).
  for (size_t i = 0; i < sizeof(kSignals) / sizeof(kSignals[0]); ++i) {
    if (kSignals[i] == sig) sigaction(sig, &g_previous[i], nullptr);
  }
  raise(sig);
}

void on_exit() {
  if (say_mine(" called exit() instead of returning", -1,
               "; kiln exits with status 1: the target's reference is broken\n"))
    _exit(1);
}

void watch_deadlines() {
  while (true) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    const int64_t now = now_ns();
    for (Slot& s : g_slots) {
      const int64_t deadline = s.deadline_ns.load(std::memory_order_acquire);
      if (deadline > 0 && now > deadline) {
        put("kiln: ");
        put(s.text);
        put(" did not return within its deadline (");
        char secs[32];
        std::snprintf(secs, sizeof secs, "%g", static_cast<double>(s.deadline_ms) / 1000.0);
        put(secs);
        put(" s); kiln exits with status 1, as a call cannot be taken back\n");
        _exit(1);
      }
    }
  }
}

void install_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    for (size_t i = 0; i < sizeof(kSignals) / sizeof(kSignals[0]); ++i) {
      struct sigaction sa {};
      sa.sa_handler = on_fatal_signal;
      sigemptyset(&sa.sa_mask);
      sigaction(kSignals[i], &sa, &g_previous[i]);
    }
    std::atexit(on_exit);
    std::thread(watch_deadlines).detach();
  });
}

}  // namespace

WatchedReferenceCall::WatchedReferenceCall(const std::string& what,
                                           std::chrono::milliseconds deadline) {
  install_once();
  for (int i = 0; i < kMaxWatched; ++i) {
    int64_t free = 0;
    if (!g_slots[i].deadline_ns.compare_exchange_strong(free, -1)) continue;
    std::strncpy(g_slots[i].text, log_safe(what, kTextBytes / 2).c_str(), kTextBytes - 1);
    g_slots[i].thread = this_thread();
    g_slots[i].deadline_ms = deadline.count();
    g_slots[i].deadline_ns.store(now_ns() + std::chrono::nanoseconds(deadline).count(),
                                 std::memory_order_release);
    slot_ = i;
    return;
  }
}

WatchedReferenceCall::~WatchedReferenceCall() {
  if (slot_ >= 0) g_slots[slot_].deadline_ns.store(0, std::memory_order_release);
}

}  // namespace kiln::eval
