// ChildServer: the sandbox child's requests other than "time" (sandbox_child_time.cc), and the
// placing, guarding and copying of tensors they share.
#include "evaluator/sandbox_child_server.h"

#include <algorithm>
#include <fstream>
#include <sstream>

namespace kiln::eval::child {

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
    return json{{"ok", true},
                {"device", device_.name()},
                {"arch", device_.arch()},
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
    } else if (a.contains("tmap")) {
      KILN_ASSIGN_OR_RETURN(TensorMapArg map, tensor_map_from_json(a["tmap"]));
      if (static_cast<size_t>(map.tensor) >= buffers.size()) {
        return invalid_argument("args: tensor map over tensor " + std::to_string(map.tensor) +
                                " but only " + std::to_string(buffers.size()) + " tensors");
      }
      KILN_ASSIGN_OR_RETURN(KernelArg arg, device_.tensor_map(map, buffers[map.tensor]));
      args.push_back(arg);
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

}  // namespace kiln::eval::child
