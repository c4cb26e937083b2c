// Runs a helper program (a compiler, a probe) with a timeout and captures its output. No shell is
// involved: arguments need no quoting. Safe to call from many threads at once.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "shared/status.h"

namespace kiln {

struct ProcessResult {
  bool status_known = false;  // false when the child was reaped elsewhere (SIGCHLD ignored)
  int exit_code = -1;         // valid when it exited normally
  int term_signal = 0;        // nonzero when a signal ended it
  bool timed_out = false;
  std::string output;         // stdout and stderr interleaved, capped at 1 MiB
};

// Runs argv[0] (looked up in PATH) with stdin from /dev/null and stdout+stderr into one pipe, in a
// process group of its own so a timeout kills it and its children together (SIGKILL).
Result<ProcessResult> run_process(const std::vector<std::string>& argv,
                                  std::chrono::milliseconds timeout);

}  // namespace kiln
