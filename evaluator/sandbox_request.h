// The sandbox child's request fields, read and range-checked: a launch, a tensor list, and the
// whole "time" request (the protocol is in sandbox_child.cc). Parsing only; no device work.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "evaluator/arena.h"
#include "evaluator/backend.h"
#include "shared/json_fields.h"
#include "shared/status.h"

namespace kiln::eval {

// One request's launch fields.
struct LaunchFields {
  KernelHandle handle = 0;
  LaunchGeometry geometry;
  std::vector<nlohmann::json> args;  // validated shape: {"tensor":i} | {"i64":v} | {"f32":v}
  unsigned char poison = 0xFF;
};

Result<LaunchFields> parse_launch(JsonFields& fields);

// Where one tensor lives in the arena.
struct TensorLayout {
  uint64_t offset = 0;
  uint64_t bytes = 0;
  bool out = false;
  bool scratch = false;           // zero-filled when placed; never copied in, back or rotated
  std::optional<uint64_t> after;  // inputs: where to copy the device copy back
};

// A list of tensors at `path` of the request named `source`; every range lies in `arena`.
Result<std::vector<TensorLayout>> parse_tensors(const nlohmann::json& list,
                                                const std::string& source,
                                                const std::string& path, const Arena& arena,
                                                bool after_required);

// A few bytes of one input of one set: a site that launches change (see do_time).
struct InputPatch {
  size_t tensor = 0;  // index into the set's tensor list (an input)
  size_t offset = 0;  // byte offset inside that tensor
  std::string bytes;
};

// A "time" request with its defaults; sets agree with sets[0] in tensor count, sizes and
// directions, and rotate_contents comes with at least two sets. `sites` (needs rotate_contents)
// has one list per set, at most kMaxSites each; `checks` gives, per check slot, the arena offset
// of every output tensor (by tensor index) where a kept launch's outputs are copied back.
struct TimeRequest {
  static constexpr size_t kMaxSites = 16;
  LaunchFields launch;
  std::vector<std::vector<TensorLayout>> sets;
  int64_t warmup = 3;
  int64_t min_samples = 10;
  int64_t max_samples = 1000;
  double max_ms = 1000;
  double target_noise_rel = 0.005;
  // > 0: stop ("early") once kEarlyStopSamples samples are in and even their fastest is slower.
  double early_stop_us = 0;
  static constexpr int64_t kEarlyStopSamples = 5;
  bool flush_l2 = true;
  bool rotate_contents = false;
  std::vector<std::vector<InputPatch>> sites;
  std::vector<std::vector<std::pair<size_t, uint64_t>>> checks;  // per slot: (tensor, offset)
};

// Reads every field of `fields` (then finish(): an unknown field is an error).
Result<TimeRequest> parse_time_request(JsonFields& fields, const Arena& arena);

}  // namespace kiln::eval
