// The sandbox child's request server (internal to the child: sandbox_child.cc reads its requests
// and writes its replies; the protocol is described there). ChildServer serves one request at a
// time against an open device; its "time" op is in sandbox_child_time.cc.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "evaluator/arena.h"
#include "evaluator/backend.h"
#include "evaluator/evaluation.h"
#include "evaluator/sandbox_request.h"
#include "shared/json_fields.h"
#include "shared/status.h"

namespace kiln::eval::child {

using nlohmann::json;

inline json error_reply(const Status& status, bool fatal = false) {
  json reply = {{"ok", false},
                {"error", status.message()},
                {"code", std::string(status_code_name(status.code()))}};
  if (fatal) reply["fatal"] = true;
  return reply;
}

// Device buffers kept across requests, keyed by size: the same shapes run many times, and an
// alloc and free per run would dominate small kernels. After each request the buffers it did not
// use are freed, so the pool holds at most what the latest request needed.
class DeviceBufferPool {
 public:
  explicit DeviceBufferPool(Device& device) : device_(device) {}
  ~DeviceBufferPool() {
    end_request();
    end_request();  // errors ignored: a poisoned device cannot free, and the process is ending
  }
  DeviceBufferPool(const DeviceBufferPool&) = delete;
  DeviceBufferPool& operator=(const DeviceBufferPool&) = delete;

  Result<void*> acquire(size_t bytes) {
    void* p = nullptr;
    if (auto it = idle_.find(bytes); it != idle_.end()) {
      p = it->second;
      idle_.erase(it);
    } else {
      KILN_ASSIGN_OR_RETURN(p, device_.alloc(bytes));
    }
    used_.emplace(bytes, p);
    return p;
  }
  void end_request() {
    for (auto& [bytes, p] : idle_) device_.free(p).ignore();
    idle_ = std::move(used_);
    used_.clear();
  }

 private:
  Device& device_;
  std::multimap<size_t, void*> idle_;  // kept from the previous request
  std::multimap<size_t, void*> used_;  // handed out during this request
};
// Serves requests against one open device. Device errors that leave the device unusable set
// fatal_: after replying the child exits so the parent respawns it.
class ChildServer {
 public:
  ChildServer(Device& device, Arena& arena) : device_(device), arena_(arena), buffers_(device) {}

  json handle(const std::string& line);
  bool fatal() const { return fatal_; }
  bool exit_requested() const { return exit_requested_; }

 private:
  Result<json> dispatch(const json& request);
  Result<json> do_load(JsonFields& f);
  Result<json> do_unload(JsonFields& f);
  Result<json> do_run(JsonFields& f);
  Result<json> do_time(JsonFields& f);
  Result<json> do_profile(JsonFields& f);

  // Passes `s` through, noting whether it makes the device unusable. In launch-related phases a
  // kInternal (what CudaDevice returns for sticky errors) is fatal too; kFailedPrecondition (a
  // device already poisoned) is fatal everywhere.
  Status device_status(Status s, bool launch_related) {
    if (s.code() == StatusCode::kFailedPrecondition ||
        (launch_related && s.code() == StatusCode::kInternal)) {
      fatal_ = true;
    }
    return s;
  }
  Result<std::vector<void*>> place(const std::vector<TensorLayout>& tensors, unsigned char poison);
  // Inputs only, uploaded from the arena (outputs get nullptr): the staging copies of rotation.
  Result<std::vector<void*>> place_inputs(const std::vector<TensorLayout>& tensors);
  Result<std::vector<KernelArg>> kernel_args(const LaunchFields& launch,
                                             const std::vector<void*>& buffers);
  Status poison_outputs(const std::vector<TensorLayout>& tensors, const std::vector<void*>& buffers,
                        unsigned char poison);
  Status copy_back(const std::vector<TensorLayout>& tensors, const std::vector<void*>& buffers);
  // A tensor's buffer with guard regions of kGuardBytes of kGuardByte before and after it
  // (docs/threats.md row 18); the request's guarded buffers are checked by guard_report().
  Result<void*> acquire_guarded(size_t bytes, size_t tensor);
  // Every guard byte of this request's guarded buffers that no longer holds the pattern, as
  // [{"tensor":i,"side":"before"|"after","offset":o,"bytes":n}] (o: the first changed byte,
  // counted from the tensor's end after it, or back from its start before it; n: how many).
  Result<json> guard_report();

  static constexpr size_t kGuardBytes = 4096;  // keeps the 256-byte alignment of allocations
  static constexpr unsigned char kGuardByte = 0xA5;
  struct Guarded {
    unsigned char* data;
    size_t bytes;
    size_t tensor;
  };
  std::vector<Guarded> guarded_;  // this request's

  Device& device_;
  Arena& arena_;
  DeviceBufferPool buffers_;
  bool fatal_ = false;
  bool exit_requested_ = false;
};

}  // namespace kiln::eval::child
