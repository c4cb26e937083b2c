// The sandbox: a child process (`kiln __sandbox`) per device that owns the device (the CUDA
// context) and runs candidates, so a hang, crash or sticky CUDA error ends only the child. The
// parent (evaluator daemon or `kiln eval`) holds no CUDA context: it sends one JSON request per
// line over a pipe, waits with a per-call watchdog, and exchanges bulk data through a shared
// memory arena (memfd) that both map.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "evaluator/arena.h"
#include "shared/status.h"

namespace kiln::eval {

struct SandboxOptions {
  std::string kiln_binary;        // the `kiln` executable to run as `kiln __sandbox`
  std::string backend = "cpu";    // "cuda" or "cpu"
  int gpu = 0;                    // device ordinal (cuda)
  size_t arena_bytes = 64 << 20;  // shared memory for inputs and outputs
};

class Sandbox {
 public:
  // Starts the child and waits for its hello (device name and arch), with `start_timeout_ms`.
  static Result<std::unique_ptr<Sandbox>> spawn(const SandboxOptions& options,
                                                uint32_t start_timeout_ms = 30000);
  ~Sandbox();  // SIGKILLs a child still running and reaps it
  Sandbox(const Sandbox&) = delete;
  Sandbox& operator=(const Sandbox&) = delete;

  // Sends one request and waits for its one-line reply. The watchdog: when `timeout_ms` passes,
  // the child is SIGKILLed and the result is kDeadlineExceeded; when the child dies (crash,
  // abort, killed), the result is kUnavailable with the signal or exit code and the tail of its
  // stderr. After either, alive() is false and the owner spawns a new sandbox.
  // A reply {"ok": false, "error": ...} is returned as a value (the caller reads "ok").
  Result<nlohmann::json> call(const nlohmann::json& request, uint32_t timeout_ms);

  bool alive() const { return pid_ > 0; }
  pid_t pid() const { return pid_; }
  unsigned char* arena() { return arena_.data(); }
  size_t arena_bytes() const { return arena_.bytes(); }
  const std::string& device_name() const { return device_name_; }
  const std::string& arch() const { return arch_; }
  const std::string& backend() const { return backend_; }
  void kill_child(); // SIGKILL + reap (tests, shutdown)

 private:
  Sandbox() = default;
  Status start(const SandboxOptions& options);
  // Waits up to `grace_ms` for the child to exit, then SIGKILLs it; reaps it, closes the pipes and
  // returns how it ended ("killed by signal 11 (Segmentation fault)", "exited with code 3").
  std::string reap(uint32_t grace_ms);
  void drain_stderr();
  Status child_failure(StatusCode code, const std::string& what, uint32_t grace_ms);

  pid_t pid_ = -1;
  int to_child_ = -1;     // child's stdin (a socket, so sends can use MSG_NOSIGNAL)
  int from_child_ = -1;   // child's stdout (one JSON object per line)
  int stderr_fd_ = -1;    // child's stderr, kept for crash reports
  Arena arena_;
  std::string scratch_dir_;  // private directory for the child's files, removed with the sandbox
  std::string read_buffer_;
  std::string stderr_tail_;
  std::string ended_;  // how the last child ended, for calls made after its death
  std::string device_name_, arch_, backend_;
};

}  // namespace kiln::eval
