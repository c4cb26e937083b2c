// Runs a function in a child process forked from this one, so that what it does to its process
// -- a crash, exit(), a throw, an endless loop -- ends the child and not the caller. `kiln targets
// --check` runs a target's reference this way (evaluator/reference_check.h). A fork copies the
// page tables of the caller's private memory: cheap for a small process, tens of milliseconds
// for one holding gigabytes (bench/results/2026-11-29-reference-fork.md), which is why the
// evaluator itself calls the reference in its own process (evaluator/reference_watch.h).
//
// The child sees a copy of this process's memory as it was at the fork, so what the function
// reads needs no passing; what it writes comes back only through MAP_SHARED memory
// (evaluator/shared_pages.h). Only the calling thread is copied into the child: the function may
// allocate and start threads of its own (glibc keeps malloc usable after fork), but must not wait
// on locks another thread of this process held.
#pragma once

#include <chrono>
#include <functional>
#include <string>

#include "shared/status.h"

namespace kiln::eval {

// OK when `call` returned in the child. Otherwise, with `what` ("the reference of target 'x'")
// leading the message:
//   INTERNAL: it threw (`what` + " threw: " + the exception's message, or the message alone
//     where it begins with `what`), it crashed (the signal), or it ended the child itself (exit
//     status) without returning;
//   DEADLINE_EXCEEDED: it ran longer than `deadline` (the child is killed);
//   UNAVAILABLE: the child could not be started.
// The child's stdout goes to stderr (a caller writing JSON to stdout keeps it clean). It dies with
// the calling thread (PR_SET_PDEATHSIG), so a killed evaluator leaves none behind.
Status run_forked(const std::function<void()>& call, std::chrono::milliseconds deadline,
                  const std::string& what);

}  // namespace kiln::eval
