// The evaluator daemon (`kiln evaluator --connect tcp://HOST:PORT`): one per GPU. It connects a
// DEALER to the coordinator's ROUTER, announces itself (hello), asks for work with credits,
// evaluates `evaluate` tasks in a worker thread (so heartbeats flow during long evaluations), and
// sends back one `result` per task. It holds no CUDA context itself: evaluations run in a sandbox
// child per device. Paranoid Pirate: heartbeats both ways; a silent coordinator is declared dead
// after `liveness` intervals and the daemon reconnects with back-off, announcing itself again.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "shared/heartbeat.h"
#include "shared/status.h"
#include "shared/transport.h"

namespace kiln::eval {

struct DaemonOptions {
  std::string connect;           // coordinator endpoint, e.g. tcp://10.0.0.5:5555
  std::string backend = "cuda";  // "cuda" or "cpu"
  int gpu = 0;
  // Tasks held at once: one running, two waiting, so a waiting task's compiles (started as it
  // arrives) have two evaluations' time to finish; a large template (flash attention's) takes
  // longer to compile than most evaluations.
  uint32_t capacity = 3;
  uint32_t compile_threads = 2;  // compiles of waiting tasks overlap the running one
  std::string cache_dir;
  std::string targets_dir;
  std::string worker_id;         // default: <host>-<backend><gpu>-<pid>
  // The model announced in the hello, by which a coordinator routes tasks and keeps populations
  // apart; empty: the GPU's own name (none on the cpu backend).
  std::string gpu_model;
  std::string kiln_binary;       // for the sandbox child
  net::HeartbeatPolicy heartbeat;
  net::CurveClient curve;  // CURVE keys (docs/security.md); empty: none
};

// Runs until `stop` becomes true or the coordinator says bye. Returns a Status only for failures
// that make running impossible (bad endpoint, no compiler for the backend).
Status run_evaluator_daemon(const DaemonOptions& options, const std::atomic<bool>& stop);

}  // namespace kiln::eval
