// What a target's reference does to the evaluating process, said plainly. The evaluator calls
// the reference in its own process (evaluator/reference.cc): a fork per call would isolate it,
// but cost the GPU suite 13% of its time (bench/results/2026-11-29-reference-fork.md). A
// reference that throws fails its call (Reference::compute returns the error); one that crashes,
// calls exit() or never returns still ends the process, and this watch makes it say so first:
//   - a fatal signal (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT) on the thread of a call: "kiln:
//     the reference of target 'x' (reference.cpp), kiln_reference, crashed (signal 11)", then
//     the signal's previous handling (a crash on another thread is not the reference's);
//   - exit() on the thread of a call: the same line with "called exit() instead of returning",
//     and the process exits with status 1, not the 0 the reference asked for;
//   - a call past its deadline: "... did not return within its deadline (300 s)", and exit
//     status 1 (the process cannot take a running call back).
// The evaluator daemon's supervisor (`kiln run`, Kubernetes, Slurm) then restarts it, and its
// log's last line says why. `kiln targets --check` runs the reference alone first
// (evaluator/reference_check.h), where a fork per call costs nothing that matters.
#pragma once

#include <chrono>
#include <string>

namespace kiln::eval {

// One call of a reference on this thread, from construction to destruction. At most kMaxWatched
// at once (the evaluator makes a few at a time, each split over up to 8 threads by rows); beyond
// that, calls run unwatched.
class WatchedReferenceCall {
 public:
  // `what`: "the reference of target 'x' (reference.cpp), kiln_reference,".
  WatchedReferenceCall(const std::string& what, std::chrono::milliseconds deadline);
  ~WatchedReferenceCall();
  WatchedReferenceCall(const WatchedReferenceCall&) = delete;
  WatchedReferenceCall& operator=(const WatchedReferenceCall&) = delete;

  static constexpr int kMaxWatched = 64;

 private:
  int slot_ = -1;
};

}  // namespace kiln::eval
