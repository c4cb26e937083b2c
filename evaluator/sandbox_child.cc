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
//                "args":[{"tensor":i}|{"i64":v}|{"f32":v}|{"tmap":m},...] in parameter order; m as
//                tensor_map_json writes it (shared/tensor_map_spec.h), encoded over tensor m.tensor
//     <tensor> = {"offset":o,"bytes":b,"out":bool,"after":o2,"scratch":bool}; "after" is required
//     for inputs; a scratch tensor (never out, no after) is zero-filled when placed and otherwise
//     left alone: not copied in, back, poisoned or rotated.
//     Inputs are copied arena[o, o+b) -> device and outputs filled with `poison` (default 255);
//     launch; synchronize; then every output goes device -> arena[o] and every INPUT device ->
//     arena[o2], so the parent sees whether the kernel changed its inputs.
//   {"op":"time",<launch>,"sets":[[<tensor>,...],...],"warmup":n,"min_samples":n,"max_samples":n,
//    "max_ms":t,"target_noise_rel":r,"flush_l2":bool,"poison":byte,"rotate_contents":bool,
//    "sites":[[<site>,...],...],"checks":[[{"tensor":i,"offset":o},...],...]}
//     -> {"ok":true,"samples_us":[...],"clocks_mhz":[...],"probes_us":[...],"noise_rel":r,
//         "stop":"noise"|"max_samples"|"max_ms","contents_of_group":[c_0,...],
//         "masks_of_group":[m_0,...],"kept":[{"slot":j,"launch":i,"contents":c,"mask":m},...],
//         "guards":[...]}
//     Sets are independent inputs with the same tensor count, sizes and directions (args name
//     tensors by index). Each set gets a buffer group; launch i (warm-up launches, then timed
//     samples: Device::time_launch, SM clock and machine probe read after each) runs on group
//     g = i % K of the K sets, outputs re-poisoned before EVERY launch, so what a group's output
//     holds at the end comes from its last launch (a group never launched keeps the poison).
//     Sampling stops once min_samples are taken and IQR/median < target_noise_rel (checked every
//     5 samples), at max_samples, or after max_ms of wall time (at least one sample is always
//     taken). Then every group's outputs go to arena[o] of ITS set's layout (and inputs with an
//     "after" to arena[o2]).
//     contents_of_group[g] is the set whose inputs group g held at its last launch: g itself,
//     unless "rotate_contents" (K >= 2): then each set's inputs also live in a staging copy that no
//     launch sees, and before launch i group g's inputs are overwritten with those of set
//     c = (g + i / K) % K, so a pointer gets other contents every round (a cache keyed on the
//     pointer replays a stale answer) and launches within a round get different contents. The
//     loop then also ends only after a whole round whose c differs from each group's first
//     contents (i / K % K != 0), up to K*K - 1 samples past max_samples or max_ms, so such a
//     replay shows in EVERY group's output.
//     Sites (docs/threats.md rows 15 and 20; needs rotate_contents;
//     <site> = {"tensor":i,"offset":o,"bytes":[..]}, the same number per set, at most 16): after
//     its contents are copied in, each
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
// Guards (docs/threats.md row 18): every tensor a kernel is launched on ("run", and the groups of
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
#include "evaluator/sandbox_child_server.h"

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
}  // namespace

using child::ChildServer;
using child::error_reply;

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
