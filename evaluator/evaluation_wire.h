// The evaluation flow's pieces that need no evaluator state: the arena layout of one input set,
// the sandbox requests' fields (tensors, arguments, geometry) and the checks of its replies
// (contents_of_group, guards, kept launches), plus the small types a verification case uses.
// Included only through evaluation_internal.h.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "evaluator/evaluation.h"
#include "evaluator/tensor_data.h"
#include "evaluator/verification_cases.h"
#include "shared/expr.h"

namespace kiln::eval {
namespace evaluation_internal {

using Clock = std::chrono::steady_clock;
inline constexpr size_t kAlign = 256;
inline constexpr unsigned char kPoisonA = 0xFF;  // NaN in f16, bf16 and f32
inline constexpr unsigned char kPoisonB = 0xFE;  // NaN in f16/bf16, a huge negative number in f32

inline size_t align_up(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

inline DType arg_dtype(const TargetArg& a, DType under_test) {
  if (a.dtype == "T") return under_test;
  return parse_dtype(a.dtype).value_or(under_test);
}

// The scale of an input's values at `shape` (validated at load time; 1 when none is given).
inline double input_scale(const TargetArg& a, const Shape& shape) {
  if (a.scale.empty()) return 1.0;
  Result<double> v = eval_expr(a.scale, expr_vars(shape, DType::kF32, {}));
  return v.is_ok() && *v > 0 && std::isfinite(*v) ? *v : 1.0;
}

// The bound of an index input at `shape` (validated at load time; at least 1).
inline int64_t index_bound(const TargetArg& a, const Shape& shape) {
  Result<int64_t> v = eval_int_expr(a.index_bound, expr_vars(shape, DType::kF32, {}));
  return v.is_ok() ? std::max<int64_t>(*v, 1) : 1;
}

enum class CaseKind { kPass, kWrong, kInputMutated, kOutOfBounds, kTimeout, kCrash, kInternal };

struct CaseOutcome {
  CaseKind kind = CaseKind::kPass;
  double worst_rel = 0;
  std::string detail;
  std::vector<std::string> outputs;  // raw output bytes, when asked for (determinism)
  double worst_abs = 0, rms = 0;     // over every output (rms: the largest of the outputs')
  // With reference statistics asked for: one unit of rounding of each output's dtype at the
  // output's largest and at its RMS reference value, the largest over the outputs -- what any
  // honest kernel may differ by (0 for integer outputs).
  double ulp_at_max = 0, ulp_at_rms = 0;
};

// One site of a timing set: an input element that timed launches change (see "sites" in
// sandbox_child.cc). `changed` is far from `original` relative to the input's spread, so a launch
// answered with a stale replay is wrong by much more than the tolerance (docs/threats.md row 20).
struct Site {
  size_t slot = 0;     // index into the set's slots (an input)
  size_t element = 0;  // element index inside that tensor
  double original = 0, changed = 0;
};

// Timing launches whose outputs are kept by reservoir sampling and checked after the fact.
inline constexpr uint32_t kCheckSlots = 2;

// Where each tensor of one input set lives in the arena.
struct TensorSlot {
  const TargetArg* arg;
  DType dtype;
  size_t count;
  size_t offset;
  size_t after = 0;  // inputs: where the child copies them back after the run
};

inline std::vector<TensorSlot> layout(const TargetSpec& t, const Shape& shape, DType dtype,
                                      bool with_after, size_t* cursor) {
  std::vector<TensorSlot> slots;
  for (const auto& a : t.args) {
    if (a.role == TargetArg::Role::kScalar) continue;
    TensorSlot s{&a, arg_dtype(a, dtype), static_cast<size_t>(element_count(a, shape)), 0};
    size_t bytes = s.count * dtype_bytes(s.dtype);
    s.offset = *cursor;
    *cursor += align_up(bytes);
    if (with_after && a.role == TargetArg::Role::kInput) {
      s.after = *cursor;
      *cursor += align_up(bytes);
    }
    slots.push_back(s);
  }
  return slots;
}

inline nlohmann::json tensors_json(const std::vector<TensorSlot>& slots) {
  nlohmann::json j = nlohmann::json::array();
  for (const auto& s : slots) {
    nlohmann::json e = {{"offset", s.offset},
                        {"bytes", s.count * dtype_bytes(s.dtype)},
                        {"out", s.arg->role == TargetArg::Role::kOutput}};
    if (s.arg->role == TargetArg::Role::kScratch) e["scratch"] = true;
    if (s.after) e["after"] = s.after;
    j.push_back(e);
  }
  return j;
}

// Kernel arguments in the calling convention: tensors, then dims, then scalars.
inline nlohmann::json args_json(const TargetSpec& t, const Shape& shape) {
  nlohmann::json j = nlohmann::json::array();
  int tensor = 0;
  for (const auto& a : t.args) {
    if (a.role != TargetArg::Role::kScalar) j.push_back({{"tensor", tensor++}});
  }
  for (const auto& d : t.dims) j.push_back({{"i64", shape.at(d)}});
  for (const auto* s : t.scalars()) {
    if (s->scalar_type == "i64")
      j.push_back({{"i64", static_cast<int64_t>(s->value)}});
    else
      j.push_back({{"f32", s->value}});
  }
  return j;
}

inline std::vector<ArgSpec> signature(const TargetSpec& t, DType dtype) {
  std::vector<ArgSpec> sig;
  for (const auto& a : t.args) {
    if (a.role == TargetArg::Role::kScalar) continue;
    // Scratch buffers are writable, like outputs.
    sig.push_back(
        {a.role == TargetArg::Role::kInput ? ArgSpec::Kind::kTensorIn : ArgSpec::Kind::kTensorOut,
         arg_dtype(a, dtype), a.name});
  }
  for (const auto& d : t.dims) sig.push_back({ArgSpec::Kind::kInt64, DType::kI64, d});
  for (const auto* s : t.scalars()) {
    sig.push_back({s->scalar_type == "i64" ? ArgSpec::Kind::kInt64 : ArgSpec::Kind::kFloat32,
                   s->scalar_type == "i64" ? DType::kI64 : DType::kF32, s->name});
  }
  return sig;
}

inline nlohmann::json geometry_json(const LaunchGeometry& g) {
  return {{"grid", {g.grid[0], g.grid[1], g.grid[2]}},
          {"block", {g.block[0], g.block[1], g.block[2]}},
          {"shared_bytes", g.shared_bytes}};
}

// The "time" reply's contents_of_group: one set index per group, each below `sets`.
inline Result<std::vector<size_t>> contents_of_group(const nlohmann::json& reply, size_t sets) {
  const nlohmann::json reported = reply.value("contents_of_group", nlohmann::json());
  bool valid = reported.is_array() && reported.size() == sets;
  std::vector<size_t> contents;
  for (size_t g = 0; valid && g < sets; ++g) {
    valid = reported[g].is_number_unsigned() && reported[g].get<uint64_t>() < sets;
    if (valid) contents.push_back(reported[g].get<size_t>());
  }
  if (!valid) {
    return internal_error("the sandbox's time reply lacks a valid contents_of_group (" +
                          reported.dump() + " for " + std::to_string(sets) + " sets)");
  }
  return contents;
}

// The sandbox reply's "guards" (see sandbox_child.cc) as a sentence naming each buffer and where
// the kernel wrote outside it, or "" when every guard held. A malformed list counts as a
// violation (the child always sends one).
inline std::string guard_violations(const nlohmann::json& reply,
                                    const std::vector<TensorSlot>& slots) {
  const nlohmann::json guards = reply.value("guards", nlohmann::json());
  if (!guards.is_array()) return "the sandbox reported no guard check";
  std::string out;
  for (const nlohmann::json& g : guards) {
    const size_t tensor = g.value("tensor", size_t{0});
    const std::string name =
        tensor < slots.size() ? slots[tensor].arg->name : "#" + std::to_string(tensor);
    const bool after = g.value("side", std::string()) == "after";
    const size_t offset = g.value("offset", size_t{0});
    const size_t bytes = g.value("bytes", size_t{0});
    out += (out.empty() ? "" : "; ") + std::to_string(bytes) + " byte(s) written " +
           (after ? "after the end of '" : "before the start of '") + name + "', the nearest " +
           std::to_string(offset) + " byte(s) " + (after ? "past its end" : "before its start");
  }
  return out.empty() ? "" : "writes outside its buffers: " + out;
}

// One entry of the "time" reply's "kept": a timed launch whose outputs wait in check slot `slot`.
struct KeptLaunch {
  uint32_t slot = 0;
  uint64_t launch = 0;
  size_t contents = 0;  // the set whose inputs it ran on
  uint32_t mask = 0;    // the sites of that set it had applied (bit k: site k)
};

// The "time" reply's "kept", validated: slots below `slots` and each at most once, contents below
// `sets`, masks within `sites` bits.
inline Result<std::vector<KeptLaunch>> kept_launches(const nlohmann::json& reply, size_t sets,
                                                     uint32_t slots, size_t sites) {
  std::vector<KeptLaunch> out;
  const nlohmann::json list = reply.value("kept", nlohmann::json::array());
  std::set<uint32_t> seen;
  bool valid = list.is_array();
  for (size_t i = 0; valid && i < list.size(); ++i) {
    const nlohmann::json& e = list[i];
    valid = e.is_object() && e.value("slot", nlohmann::json()).is_number_unsigned() &&
            e.value("launch", nlohmann::json()).is_number_unsigned() &&
            e.value("contents", nlohmann::json()).is_number_unsigned() &&
            e.value("mask", nlohmann::json()).is_number_unsigned();
    if (!valid) break;
    KeptLaunch k{e["slot"].get<uint32_t>(), e["launch"].get<uint64_t>(),
                 e["contents"].get<size_t>(), e["mask"].get<uint32_t>()};
    valid = k.slot < slots && seen.insert(k.slot).second && k.contents < sets &&
            (sites >= 32 || (uint64_t{k.mask} >> sites) == 0);
    if (valid) out.push_back(k);
  }
  if (!valid)
    return internal_error("the sandbox's time reply has an invalid kept list (" + list.dump() +
                          ")");
  return out;
}

// The relative spacing of a dtype's values near 1 (2^-10 for f16, 2^-7 for bf16, 2^-23 for f32,
// 2^-52 for f64), 0 for integers.
inline double unit_roundoff(DType t) {
  switch (t) {
    case DType::kF16:
      return 0x1p-10;
    case DType::kBF16:
      return 0x1p-7;
    case DType::kF32:
      return 0x1p-23;
    case DType::kF64:
      return 0x1p-52;
    default:
      return 0;
  }
}

inline std::string fmt_double(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.3g", v);
  return buf;
}

}  // namespace evaluation_internal
}  // namespace kiln::eval
