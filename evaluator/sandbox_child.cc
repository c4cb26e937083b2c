// The sandbox child (`kiln __sandbox`): opens the device, maps the arena, and serves requests, one
// JSON object per line on stdin, one JSON reply per line on the ORIGINAL stdout.
//
// Requests and replies. Every reply has "ok"; an error reply has "error" (text) and "code" (a
// StatusCode name, e.g. "INVALID_ARGUMENT"), and "fatal": true when the child exits right after it
// (the device is unusable: code 3, or it could not be opened: code 2). Unknown ops, malformed
// lines and bad fields are non-fatal errors; the next request is served as usual.
//   {"op":"hello"} -> {"ok":true,"device":name,"arch":arch,"backend":b}
//   {"op":"load","path":file,"kernel":name} -> {"ok":true,"handle":h}   (cubin or .so bytes)
//   {"op":"unload","handle":h} -> {"ok":true}
//   {"op":"run",<launch>,"tensors":[<tensor>,...],"poison":byte} -> {"ok":true,"guards":[...]}
//     <launch> = "handle":h,"grid":[x,y,z],"block":[x,y,z],"shared_bytes":n (default 0),
//                "args":[{"tensor":i}|{"i64":v}|{"f32":v},...] in parameter order
//     <tensor> = {"offset":o,"bytes":b,"out":bool,"after":o2,"scratch":bool}; "after" is required
//     for inputs; a scratch tensor (never out, no after) is zero-filled when placed and otherwise
//     left alone: not copied in, back, poisoned or rotated.
//     Inputs are copied arena[o, o+b) -> device and outputs filled with `poison` (default 255);
//     launch; synchronize; then every output goes device -> arena[o] and every INPUT device ->
//     arena[o2], so the parent sees whether the kernel changed its inputs.
//   {"op":"time",<launch>,"sets":[[<tensor>,...],...],"warmup":n,"min_samples":n,"max_samples":n,
//    "max_ms":t,"target_noise_rel":r,"flush_l2":bool,"poison":byte,"rotate_contents":bool,
//    "sites":[[<site>,...],...],"checks":[[{"tensor":i,"offset":o},...],...]}
//     -> {"ok":true,"samples_us":[...],"clocks_mhz":[...],"noise_rel":r,
//         "stop":"noise"|"max_samples"|"max_ms","contents_of_group":[c_0,...],
//         "masks_of_group":[m_0,...],"kept":[{"slot":j,"launch":i,"contents":c,"mask":m},...],
//         "guards":[...]}
//     Sets are independent inputs with the same tensor count, sizes and directions (args name
//     tensors by index). Each set gets a buffer group; launch i (warm-up launches, then timed
//     samples: Device::time_launch, SM clock read after each) runs on group g = i % K of the K
//     sets, outputs re-poisoned before EVERY launch, so what a group's output holds at the end
//     comes from its last launch (a group never launched keeps the poison). Sampling stops once
//     min_samples are taken and IQR/median < target_noise_rel (checked every 5 samples), at
//     max_samples, or after max_ms of wall time (at least one sample is always taken). Then every
//     group's outputs go to arena[o] of ITS set's layout (and inputs with an "after" to arena[o2]).
//     contents_of_group[g] is the set whose inputs group g held at its last launch: g itself,
//     unless "rotate_contents" (K >= 2): then each set's inputs also live in a staging copy that no
//     launch sees, and before launch i group g's inputs are overwritten with those of set
//     c = (g + i / K) % K, so a pointer gets other contents every round (a cache keyed on the
//     pointer replays a stale answer) and launches within a round get different contents. The
//     loop then also ends only after a whole round whose c differs from each group's first
//     contents (i / K % K != 0), up to K*K - 1 samples past max_samples or max_ms, so such a
//     replay shows in EVERY group's output.
//     Sites (THREATS.md rows 15 and 20; needs rotate_contents; <site> = {"tensor":i,"offset":o,
//     "bytes":[..]}, the same number per set, at most 16): after its contents are copied in, each
//     launch also gets the bytes of a subset of its contents' sites, a mask drawn here in secret
//     (LaunchSchedule) that does not repeat, so no launch sees inputs an earlier one had; then each
//     group runs one closing launch on its own set with EVERY site applied (mask all ones, never
//     used before), whose outputs are the ones copied back. "checks" gives arena places for
//     outputs of timed launches kept by reservoir sampling as they happen (one slot each); "kept"
//     says which launch each filled slot holds, on which contents and with which mask, so the
//     parent can rebuild its inputs. masks_of_group[g] is the mask of group g's last launch.
//     HAZARD: the device copies take time between samples, never inside one (they complete
//     before time_launch records its start). Defaults: warmup 3, min_samples 10, max_samples
//     1000, max_ms 1000, target_noise_rel 0.005, flush_l2 true, rotate_contents false.
//   {"op":"profile",<launch>,"tensors":[<tensor>,...],"poison":byte}
//     -> {"ok":true,"values":{key:number,...},"notice":text}
//     Places the tensors as "run" does ("after" optional), then Device::profile_launch: the
//     kernel's resource use and, where CUPTI works, its hardware counters from one more launch
//     that CUPTI replays (keys: evaluator/profile/metric_names.h). Nothing is copied back. A
//     backend without a profiler answers a non-fatal UNIMPLEMENTED error; counters that cannot be
//     read are not an error: "notice" says why they are missing.
//   {"op":"exit"} -> {"ok":true}, then exit code 0. End of input also exits 0.
// Guards (THREATS.md row 18): every tensor a kernel is launched on ("run", and the groups of
// "time") lies between two 4 KiB regions filled with 0xA5; after the kernel ran, "guards" lists
// each region some byte of which changed: {"tensor":i,"side":"before"|"after","offset":o,
// "bytes":n}, o the changed byte nearest the tensor (0: right at its end or start), n how many.
// Ranges are checked against the arena; overlaps between them are the parent's business.
//
// Hazards: on the cpu backend the candidate runs in this process and can do anything it can; fd 1
// is pointed at stderr before the device opens, so printf from a candidate (or spdlog's default
// logger, which writes to stdout) cannot corrupt the protocol by accident, but replies from here
// are not proof of anything against a hostile candidate (see cpu_device.h).
#include "evaluator/sandbox_child.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "evaluator/arena.h"
#include "evaluator/device_factory.h"
#include "evaluator/launch_schedule.h"
#include "evaluator/sandbox_request.h"
#include "shared/json_fields.h"

namespace kiln::eval {
namespace {

using nlohmann::json;

constexpr int kExitBadStart = 2;
constexpr int kExitFatal = 3;

struct ChildArgs {
  std::string backend;
  int gpu = 0;
  int arena_fd = -1;
  size_t arena_bytes = 0;
  std::string scratch_dir;
};

Result<ChildArgs> parse_args(int argc, char** argv) {
  ChildArgs args;
  auto number = [](const std::string& flag, const char* text, auto* out) -> Status {
    const char* end = text + std::strlen(text);
    auto [ptr, ec] = std::from_chars(text, end, *out);
    if (ec != std::errc() || ptr != end) return invalid_argument(flag + ": not a number: " + text);
    return Status::ok();
  };
  for (int i = 1; i < argc; i += 2) {
    std::string flag = argv[i];
    if (i + 1 >= argc) return invalid_argument(flag + ": missing value");
    const char* value = argv[i + 1];
    if (flag == "--backend") {
      args.backend = value;
    } else if (flag == "--scratch-dir") {
      args.scratch_dir = value;
    } else if (flag == "--gpu") {
      KILN_RETURN_IF_ERROR(number(flag, value, &args.gpu));
    } else if (flag == "--arena-fd") {
      KILN_RETURN_IF_ERROR(number(flag, value, &args.arena_fd));
    } else if (flag == "--arena-bytes") {
      KILN_RETURN_IF_ERROR(number(flag, value, &args.arena_bytes));
    } else {
      return invalid_argument("unknown flag " + flag);
    }
  }
  if (args.backend.empty() || args.arena_fd < 0 || args.arena_bytes == 0) {
    return invalid_argument("--backend, --arena-fd and --arena-bytes are required");
  }
  return args;
}

json error_reply(const Status& status, bool fatal = false) {
  json reply = {{"ok", false},
                {"error", status.message()},
                {"code", std::string(status_code_name(status.code()))}};
  if (fatal) reply["fatal"] = true;
  return reply;
}

Status write_line(int fd, const json& reply) {
  std::string line = reply.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
  size_t done = 0;
  while (done < line.size()) {
    ssize_t n = write(fd, line.data() + done, line.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return unavailable(std::string("writing a reply: ") + std::strerror(errno));
    done += static_cast<size_t>(n);
  }
  return Status::ok();
}

// Median-relative interquartile range of `samples` (linear interpolation between order stats).
double relative_iqr(std::vector<double> samples) {
  if (samples.size() < 2) return 1.0;
  std::sort(samples.begin(), samples.end());
  auto quantile = [&](double q) {
    double pos = q * static_cast<double>(samples.size() - 1);
    size_t lo = static_cast<size_t>(pos);
    size_t hi = std::min(lo + 1, samples.size() - 1);
    return samples[lo] + (samples[hi] - samples[lo]) * (pos - static_cast<double>(lo));
  };
  double median = quantile(0.5);
  return median > 0 ? (quantile(0.75) - quantile(0.25)) / median : 1.0;
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
  // (THREATS.md row 18); the request's guarded buffers are checked by guard_report().
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

json ChildServer::handle(const std::string& line) {
  json request = json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (request.is_discarded()) {
    return error_reply(invalid_argument("request is not valid JSON: " + line.substr(0, 200)));
  }
  Result<json> reply = internal_error("unreachable");
  try {
    reply = dispatch(request);
  } catch (const json::exception& e) {  // fields are validated first; this is a kiln bug
    reply = internal_error(std::string("handling the request: ") + e.what());
  }
  buffers_.end_request();
  guarded_.clear();
  if (!reply.is_ok()) return error_reply(reply.status(), fatal_);
  return *reply;
}

Result<json> ChildServer::dispatch(const json& request) {
  std::string op;
  {
    JsonFields probe(request, "request");
    KILN_RETURN_IF_ERROR(probe.status());
    KILN_RETURN_IF_ERROR(probe.get("op", &op, true));
  }
  JsonFields f(request, "request '" + op + "'");
  KILN_RETURN_IF_ERROR(f.get("op", &op, true));
  // Each op reads its fields, then f.finish() rejects any it did not read (a misspelt field is
  // an error, caught before anything runs).
  if (op == "hello") {
    KILN_RETURN_IF_ERROR(f.finish());
    return json{{"ok", true}, {"device", device_.name()}, {"arch", device_.arch()},
                {"backend", device_.backend()}};
  }
  if (op == "exit") {
    KILN_RETURN_IF_ERROR(f.finish());
    exit_requested_ = true;
    return json{{"ok", true}};
  }
  if (op == "load") return do_load(f);
  if (op == "unload") return do_unload(f);
  if (op == "run") return do_run(f);
  if (op == "time") return do_time(f);
  if (op == "profile") return do_profile(f);
  return invalid_argument("unknown op '" + op + "'");
}

Result<json> ChildServer::do_load(JsonFields& f) {
  std::string path, kernel;
  KILN_RETURN_IF_ERROR(f.get("path", &path, true));
  KILN_RETURN_IF_ERROR(f.get("kernel", &kernel, true));
  KILN_RETURN_IF_ERROR(f.finish());
  std::ifstream in(path, std::ios::binary);
  if (!in) return not_found("load: cannot open " + path);
  std::stringstream bytes;
  bytes << in.rdbuf();
  auto handle = device_.load(bytes.str(), kernel);
  if (!handle.is_ok()) return device_status(handle.status(), false);
  return json{{"ok", true}, {"handle", *handle}};
}

Result<json> ChildServer::do_unload(JsonFields& f) {
  int64_t handle = -1;
  KILN_RETURN_IF_ERROR(f.get("handle", &handle, true));
  KILN_RETURN_IF_ERROR(f.finish());
  KILN_RETURN_IF_ERROR(device_status(device_.unload(static_cast<KernelHandle>(handle)), false));
  return json{{"ok", true}};
}

Result<std::vector<void*>> ChildServer::place(const std::vector<TensorLayout>& tensors,
                                              unsigned char poison) {
  std::vector<void*> buffers;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const TensorLayout& t = tensors[i];
    auto buffer = acquire_guarded(t.bytes, i);
    if (!buffer.is_ok()) return buffer.status();
    buffers.push_back(*buffer);
    Status s = t.scratch ? device_.fill(*buffer, 0, t.bytes)
               : t.out   ? device_.fill(*buffer, poison, t.bytes)
                         : device_.copy_to_device(*buffer, arena_.data() + t.offset, t.bytes);
    KILN_RETURN_IF_ERROR(device_status(s, true));
  }
  return buffers;
}

Result<void*> ChildServer::acquire_guarded(size_t bytes, size_t tensor) {
  // At least one byte, so an empty tensor still has a distinct, valid pointer.
  const size_t size = std::max<size_t>(bytes, 1);
  auto buffer = buffers_.acquire(size + 2 * kGuardBytes);
  if (!buffer.is_ok()) return device_status(buffer.status(), true);
  auto* base = static_cast<unsigned char*>(*buffer);
  KILN_RETURN_IF_ERROR(device_status(device_.fill(base, kGuardByte, kGuardBytes), true));
  KILN_RETURN_IF_ERROR(device_status(
      device_.fill(base + kGuardBytes + bytes, kGuardByte, kGuardBytes + size - bytes), true));
  guarded_.push_back({base + kGuardBytes, bytes, tensor});
  return static_cast<void*>(base + kGuardBytes);
}

Result<json> ChildServer::guard_report() {
  json report = json::array();
  std::vector<unsigned char> host(kGuardBytes);
  for (const Guarded& g : guarded_) {
    for (const bool after : {false, true}) {
      const unsigned char* src = after ? g.data + g.bytes : g.data - kGuardBytes;
      KILN_RETURN_IF_ERROR(
          device_status(device_.copy_to_host(host.data(), src, kGuardBytes), true));
      size_t first = kGuardBytes, count = 0;
      for (size_t i = 0; i < kGuardBytes; ++i) {
        if (host[i] == kGuardByte) continue;
        // Before the tensor, distance back from its start; after it, distance from its end.
        const size_t offset = after ? i : kGuardBytes - 1 - i;
        first = std::min(first, offset);
        ++count;
      }
      if (count > 0) {
        report.push_back({{"tensor", g.tensor},
                          {"side", after ? "after" : "before"},
                          {"offset", first},
                          {"bytes", count}});
      }
    }
  }
  return report;
}

Result<std::vector<void*>> ChildServer::place_inputs(const std::vector<TensorLayout>& tensors) {
  std::vector<void*> buffers;
  for (const TensorLayout& t : tensors) {
    if (t.out || t.scratch) {
      buffers.push_back(nullptr);
      continue;
    }
    auto buffer = buffers_.acquire(std::max<uint64_t>(t.bytes, 1));
    if (!buffer.is_ok()) return device_status(buffer.status(), true);
    buffers.push_back(*buffer);
    Status s = device_.copy_to_device(*buffer, arena_.data() + t.offset, t.bytes);
    KILN_RETURN_IF_ERROR(device_status(s, true));
  }
  return buffers;
}

Result<std::vector<KernelArg>> ChildServer::kernel_args(const LaunchFields& launch,
                                                        const std::vector<void*>& buffers) {
  std::vector<KernelArg> args;
  for (const json& a : launch.args) {
    if (a.contains("tensor")) {
      uint64_t index = a["tensor"].get<uint64_t>();
      if (index >= buffers.size()) {
        return invalid_argument("args: tensor index " + std::to_string(index) + " but only " +
                                std::to_string(buffers.size()) + " tensors");
      }
      args.push_back(KernelArg::pointer(buffers[index]));
    } else if (a.contains("i64")) {
      args.push_back(KernelArg::int64(a["i64"].get<int64_t>()));
    } else {
      args.push_back(KernelArg::float32(a["f32"].get<float>()));
    }
  }
  return args;
}

Status ChildServer::poison_outputs(const std::vector<TensorLayout>& tensors,
                                   const std::vector<void*>& buffers, unsigned char poison) {
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (tensors[i].out) {
      KILN_RETURN_IF_ERROR(device_status(device_.fill(buffers[i], poison, tensors[i].bytes), true));
    }
  }
  return Status::ok();
}

Status ChildServer::copy_back(const std::vector<TensorLayout>& tensors,
                              const std::vector<void*>& buffers) {
  for (size_t i = 0; i < tensors.size(); ++i) {
    const TensorLayout& t = tensors[i];
    if (!t.out && !t.after) continue;
    uint64_t target = t.out ? t.offset : *t.after;
    Status s = device_.copy_to_host(arena_.data() + target, buffers[i], t.bytes);
    KILN_RETURN_IF_ERROR(device_status(s, true));
  }
  return Status::ok();
}

Result<json> ChildServer::do_run(JsonFields& f) {
  KILN_ASSIGN_OR_RETURN(LaunchFields launch, parse_launch(f));
  const json* list = f.raw("tensors");
  if (list == nullptr) return f.field_error("tensors", "missing (required)");
  KILN_ASSIGN_OR_RETURN(auto tensors,
                        parse_tensors(*list, "request 'run'", "tensors", arena_, true));
  KILN_RETURN_IF_ERROR(f.finish());
  KILN_ASSIGN_OR_RETURN(auto buffers, place(tensors, launch.poison));
  KILN_ASSIGN_OR_RETURN(auto args, kernel_args(launch, buffers));
  KILN_RETURN_IF_ERROR(device_status(device_.launch(launch.handle, launch.geometry, args), true));
  KILN_RETURN_IF_ERROR(device_status(device_.synchronize(), true));
  KILN_RETURN_IF_ERROR(copy_back(tensors, buffers));
  KILN_ASSIGN_OR_RETURN(json guards, guard_report());
  return json{{"ok", true}, {"guards", guards}};
}

Result<json> ChildServer::do_profile(JsonFields& f) {
  KILN_ASSIGN_OR_RETURN(LaunchFields launch, parse_launch(f));
  const json* list = f.raw("tensors");
  if (list == nullptr) return f.field_error("tensors", "missing (required)");
  KILN_ASSIGN_OR_RETURN(auto tensors,
                        parse_tensors(*list, "request 'profile'", "tensors", arena_, false));
  KILN_RETURN_IF_ERROR(f.finish());
  KILN_ASSIGN_OR_RETURN(auto buffers, place(tensors, launch.poison));
  KILN_ASSIGN_OR_RETURN(auto args, kernel_args(launch, buffers));
  auto profiled = device_.profile_launch(launch.handle, launch.geometry, args);
  if (!profiled.is_ok()) {
    if (profiled.status().code() == StatusCode::kUnimplemented) return profiled.status();
    return device_status(profiled.status(), true);
  }
  return json{{"ok", true}, {"values", profiled->values}, {"notice", profiled->notice}};
}

Result<json> ChildServer::do_time(JsonFields& f) {
  KILN_ASSIGN_OR_RETURN(TimeRequest t, parse_time_request(f, arena_));
  const size_t k = t.sets.size();
  std::vector<std::vector<void*>> buffers;  // the groups the kernel is launched on
  std::vector<std::vector<void*>> staging;  // rotate_contents: each set's inputs, never launched on
  for (const auto& tensors : t.sets) {
    KILN_ASSIGN_OR_RETURN(auto placed, place(tensors, t.launch.poison));
    buffers.push_back(std::move(placed));
    if (t.rotate_contents) {
      KILN_ASSIGN_OR_RETURN(auto inputs, place_inputs(tensors));
      staging.push_back(std::move(inputs));
    }
  }
  std::vector<std::vector<KernelArg>> args;
  for (const auto& b : buffers) {
    KILN_ASSIGN_OR_RETURN(auto a, kernel_args(t.launch, b));
    args.push_back(std::move(a));
  }

  // Where kept launches' outputs wait on the device until the end (one buffer per output).
  std::vector<std::vector<void*>> kept(t.checks.size());
  for (size_t slot = 0; slot < t.checks.size(); ++slot) {
    for (const auto& [tensor, offset] : t.checks[slot]) {
      auto buffer = buffers_.acquire(std::max<uint64_t>(t.sets[0][tensor].bytes, 1));
      if (!buffer.is_ok()) return device_status(buffer.status(), true);
      kept[slot].push_back(*buffer);
    }
  }
  const uint32_t site_count = t.sites.empty() ? 0 : static_cast<uint32_t>(t.sites[0].size());
  LaunchSchedule schedule(k, site_count, static_cast<uint32_t>(t.checks.size()));
  struct KeptLaunch {
    uint64_t launch = 0;
    size_t contents = 0;
    uint32_t mask = 0;
  };
  std::vector<std::optional<KeptLaunch>> kept_meta(t.checks.size());

  // Puts set `c`'s inputs into group `g` with the sites of `mask` applied.
  auto load_contents = [&](size_t g, size_t c, uint32_t mask) -> Status {
    for (size_t i = 0; i < t.sets[g].size(); ++i) {
      if (t.sets[g][i].out || t.sets[g][i].scratch) continue;
      Status s = device_.copy_on_device(buffers[g][i], staging[c][i], t.sets[g][i].bytes);
      KILN_RETURN_IF_ERROR(device_status(std::move(s), true));
    }
    for (uint32_t bit = 0; bit < site_count; ++bit) {
      if (!(mask >> bit & 1u)) continue;
      const InputPatch& p = t.sites[c][bit];
      void* dst = static_cast<unsigned char*>(buffers[g][p.tensor]) + p.offset;
      Status s = device_.copy_to_device(dst, p.bytes.data(), p.bytes.size());
      KILN_RETURN_IF_ERROR(device_status(std::move(s), true));
    }
    return Status::ok();
  };

  // Readies the group of the next launch (warm-up and timed alike) and returns its index.
  std::vector<size_t> contents(k);
  std::vector<uint32_t> masks(k, 0);
  for (size_t g = 0; g < k; ++g) contents[g] = g;
  uint64_t launches = 0;
  auto next_group = [&]() -> Result<size_t> {
    const size_t g = launches % k;
    if (t.rotate_contents) {
      const size_t c = (g + launches / k) % k;
      masks[g] = schedule.next_mask(c);
      KILN_RETURN_IF_ERROR(load_contents(g, c, masks[g]));
      contents[g] = c;
    }
    KILN_RETURN_IF_ERROR(poison_outputs(t.sets[g], buffers[g], t.launch.poison));
    ++launches;
    return g;
  };
  // With rotation, the loop ends only after a whole round whose contents are no group's first.
  auto rotation_may_end = [&] {
    return !t.rotate_contents || (launches % k == 0 && (launches / k - 1) % k != 0);
  };

  for (int64_t w = 0; w < t.warmup; ++w) {
    KILN_ASSIGN_OR_RETURN(size_t g, next_group());
    Status launched = device_.launch(t.launch.handle, t.launch.geometry, args[g]);
    KILN_RETURN_IF_ERROR(device_status(std::move(launched), true));
  }
  KILN_RETURN_IF_ERROR(device_status(device_.synchronize(), true));

  std::vector<double> samples_us;
  std::vector<int> clocks_mhz;
  std::string stop;
  double noise_rel = 1.0;
  const auto start = std::chrono::steady_clock::now();
  while (stop.empty() || !rotation_may_end()) {
    KILN_ASSIGN_OR_RETURN(size_t g, next_group());
    auto time = device_.time_launch(t.launch.handle, t.launch.geometry, args[g], t.flush_l2);
    if (!time.is_ok()) return device_status(time.status(), true);
    samples_us.push_back(*time);
    clocks_mhz.push_back(device_.sm_clock_mhz());
    // Kept or not is decided after the launch, outside the timed region (THREATS.md row 16).
    if (int slot = schedule.keep_slot(samples_us.size() - 1); slot >= 0) {
      for (size_t o = 0; o < t.checks[slot].size(); ++o) {
        const size_t tensor = t.checks[slot][o].first;
        Status s =
            device_.copy_on_device(kept[slot][o], buffers[g][tensor], t.sets[g][tensor].bytes);
        KILN_RETURN_IF_ERROR(device_status(std::move(s), true));
      }
      kept_meta[slot] = KeptLaunch{launches - 1, contents[g], masks[g]};
    }
    if (!stop.empty()) continue;  // only finishing the rotation's round
    const auto n = static_cast<int64_t>(samples_us.size());
    double elapsed_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    if (n >= t.min_samples && (n == t.min_samples || n % 5 == 0)) {
      noise_rel = relative_iqr(samples_us);
      if (noise_rel < t.target_noise_rel) stop = "noise";
    }
    if (stop.empty() && n >= t.max_samples) stop = "max_samples";
    if (stop.empty() && elapsed_ms >= t.max_ms) stop = "max_ms";
  }
  noise_rel = relative_iqr(samples_us);
  if (site_count > 0) {
    // The closing launch of each group: its own set's inputs with every site applied, contents
    // no launch has had before, timed like the others (the sample is not kept). The parent
    // computed this launch's reference while the others ran and checks these outputs.
    for (size_t g = 0; g < k; ++g) {
      KILN_RETURN_IF_ERROR(load_contents(g, g, schedule.full_mask()));
      KILN_RETURN_IF_ERROR(poison_outputs(t.sets[g], buffers[g], t.launch.poison));
      auto time = device_.time_launch(t.launch.handle, t.launch.geometry, args[g], t.flush_l2);
      if (!time.is_ok()) return device_status(time.status(), true);
      contents[g] = g;
      masks[g] = schedule.full_mask();
    }
  }
  for (size_t g = 0; g < k; ++g) KILN_RETURN_IF_ERROR(copy_back(t.sets[g], buffers[g]));
  KILN_ASSIGN_OR_RETURN(json guards, guard_report());
  json kept_json = json::array();
  for (size_t slot = 0; slot < kept.size(); ++slot) {
    if (!kept_meta[slot]) continue;
    for (size_t o = 0; o < t.checks[slot].size(); ++o) {
      const auto& [tensor, offset] = t.checks[slot][o];
      Status s =
          device_.copy_to_host(arena_.data() + offset, kept[slot][o], t.sets[0][tensor].bytes);
      KILN_RETURN_IF_ERROR(device_status(std::move(s), true));
    }
    kept_json.push_back({{"slot", slot},
                         {"launch", kept_meta[slot]->launch},
                         {"contents", kept_meta[slot]->contents},
                         {"mask", kept_meta[slot]->mask}});
  }
  return json{{"ok", true},
              {"samples_us", samples_us},
              {"clocks_mhz", clocks_mhz},
              {"noise_rel", noise_rel},
              {"stop", stop},
              {"contents_of_group", contents},
              {"masks_of_group", masks},
              {"kept", kept_json},
              {"guards", guards}};
}

}  // namespace

int sandbox_child_main(int argc, char** argv) {
  // The protocol keeps the original stdout; fd 1 becomes stderr so nothing else can write there.
  int reply_fd = fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 3);
  if (reply_fd < 0 || dup2(STDERR_FILENO, STDOUT_FILENO) < 0) {
    std::fprintf(stderr, "kiln __sandbox: cannot set up stdout: %s\n", std::strerror(errno));
    return kExitBadStart;
  }
  auto args = parse_args(argc, argv);
  if (!args.is_ok()) {
    std::fprintf(stderr, "kiln __sandbox: %s\n", args.status().message().c_str());
    return kExitBadStart;
  }
  auto arena = Arena::adopt(args->arena_fd, args->arena_bytes);
  if (!arena.is_ok()) {
    std::fprintf(stderr, "kiln __sandbox: %s\n", arena.status().message().c_str());
    return kExitBadStart;
  }
  auto device = open_device(args->backend, args->gpu, args->scratch_dir);
  if (!device.is_ok()) {
    // Answer the first request (the parent's hello) with the reason and its code, then leave.
    std::fprintf(stderr, "kiln __sandbox: %s\n", device.status().message().c_str());
    if (std::string line; std::getline(std::cin, line)) {
      write_line(reply_fd, error_reply(device.status(), /*fatal=*/true)).ignore();
    }
    return kExitBadStart;
  }
  ChildServer server(**device, *arena);
  // Requests come from kiln itself (the parent), so lines are not length-limited here.
  for (std::string line; std::getline(std::cin, line);) {
    json reply = server.handle(line);
    if (Status s = write_line(reply_fd, reply); !s.is_ok()) {
      std::fprintf(stderr, "kiln __sandbox: %s\n", s.message().c_str());
      return kExitBadStart;
    }
    if (server.fatal()) return kExitFatal;
    if (server.exit_requested()) return 0;
  }
  return 0;  // the parent closed our stdin
}

}  // namespace kiln::eval
