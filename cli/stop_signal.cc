#include "cli/stop_signal.h"

namespace kiln::cli {
namespace {

std::atomic<bool> g_stop_requested{false};
extern "C" void request_stop(int) { g_stop_requested.store(true); }

}  // namespace

StopOnSignal::StopOnSignal(Syscalls syscalls) {
  g_stop_requested.store(false);
  struct sigaction sa {};
  sa.sa_handler = request_stop;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = syscalls == Syscalls::kRestart ? SA_RESTART : 0;
  sigaction(SIGINT, &sa, &old_int_);
  sigaction(SIGTERM, &sa, &old_term_);
}

StopOnSignal::~StopOnSignal() {
  sigaction(SIGINT, &old_int_, nullptr);
  sigaction(SIGTERM, &old_term_, nullptr);
}

const std::atomic<bool>& StopOnSignal::flag() { return g_stop_requested; }

}  // namespace kiln::cli
