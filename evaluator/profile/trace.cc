// Reading libkiln_inject.so's trace files and aggregating kernels by name (see trace.h). Each line
// is one JSON object with a "kind": process, kernel, dropped, error, end. Lines are checked field
// by field; unknown fields are allowed (newer injection libraries may add some), unknown kinds
// and wrongly typed fields are not.
#include "evaluator/profile/trace.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "evaluator/profile/op_shapes.h"
#include "evaluator/profile/trace_targets.h"

namespace kiln::profile {
namespace {

using nlohmann::json;

// A trace line longer than this is not one the injection library writes (names are < 64 KB).
constexpr size_t kMaxLineBytes = 1 << 20;

// Reads an unsigned integer field; "" when fine, else why not. Absent is fine unless required.
std::string get_uint(const json& j, const char* key, bool required, uint64_t* out) {
  auto it = j.find(key);
  if (it == j.end()) return required ? std::string("missing field '") + key + "'" : "";
  if (!it->is_number_unsigned()) {
    return std::string("field '") + key + "': expected a non-negative integer, got " + it->dump();
  }
  *out = it->get<uint64_t>();
  return "";
}

std::string get_string(const json& j, const char* key, bool required, std::string* out) {
  auto it = j.find(key);
  if (it == j.end()) return required ? std::string("missing field '") + key + "'" : "";
  if (!it->is_string()) return std::string("field '") + key + "': expected a string";
  *out = it->get<std::string>();
  return "";
}

std::string get_dim3(const json& j, const char* key, int64_t out[3]) {
  auto it = j.find(key);
  if (it == j.end()) return "";
  if (!it->is_array() || it->size() != 3) {
    return std::string("field '") + key + "': expected an array of 3 integers";
  }
  for (size_t i = 0; i < 3; ++i) {
    if (!(*it)[i].is_number_integer() || (*it)[i].get<int64_t>() < 0) {
      return std::string("field '") + key + "': expected an array of 3 non-negative integers";
    }
    out[i] = (*it)[i].get<int64_t>();
  }
  return "";
}

std::string parse_kernel(const json& j, KernelRecord* k) {
  std::string why;
  uint64_t device = 0, stream = 0;
  for (std::string w :
       {get_string(j, "name", true, &k->name), get_string(j, "mangled", false, &k->mangled),
        get_uint(j, "start_ns", true, &k->start_ns), get_uint(j, "end_ns", true, &k->end_ns),
        get_uint(j, "device", false, &device), get_uint(j, "stream", false, &stream),
        get_uint(j, "correlation", false, &k->correlation),
        get_string(j, "range", false, &k->range), get_dim3(j, "grid", k->grid),
        get_dim3(j, "block", k->block)}) {
    if (!w.empty()) return w;
  }
  if (k->name.empty()) return "field 'name': empty";
  if (k->end_ns < k->start_ns) {
    return "end_ns " + std::to_string(k->end_ns) + " is before start_ns " +
           std::to_string(k->start_ns);
  }
  if (k->duration_ns() > kMaxKernelNs) {
    return "end_ns - start_ns is " + std::to_string(k->duration_ns()) +
           " ns, more than a day: not a kernel's time";
  }
  if (device > UINT32_MAX || stream > UINT32_MAX) return "device or stream out of range";
  k->device = static_cast<uint32_t>(device);
  k->stream = static_cast<uint32_t>(stream);
  return "";
}

// Handles one line; returns "" or why it was skipped.
std::string read_line(const std::string& line, TraceProcess* proc, TraceSet* set) {
  if (line.size() > kMaxLineBytes) return "line longer than 1 MiB";
  json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return "not valid JSON: " + line.substr(0, 80);
  if (!j.is_object()) return "not a JSON object";
  std::string kind;
  if (std::string w = get_string(j, "kind", true, &kind); !w.empty()) return w;
  if (kind == "kernel") {
    KernelRecord k;
    if (std::string w = parse_kernel(j, &k); !w.empty()) return w;
    set->kernels.push_back(std::move(k));
    ++proc->kernels;
    return "";
  }
  if (kind == "process") {
    uint64_t version = 0, pid = 0;
    for (std::string w : {get_uint(j, "version", true, &version), get_uint(j, "pid", true, &pid),
                          get_string(j, "exe", false, &proc->exe)}) {
      if (!w.empty()) return w;
    }
    if (version != 1) return "trace format version " + std::to_string(version) + " (this kiln reads 1)";
    proc->pid = static_cast<int64_t>(pid);
    return "";
  }
  if (kind == "dropped") {
    uint64_t n = 0;
    if (std::string w = get_uint(j, "records", true, &n); !w.empty()) return w;
    proc->dropped += n;
    return "";
  }
  if (kind == "error") {
    std::string message;
    if (std::string w = get_string(j, "message", true, &message); !w.empty()) return w;
    proc->errors.push_back(message);
    return "";
  }
  if (kind == "end") {
    proc->ended = true;
    return "";
  }
  return "unknown kind '" + kind + "'";
}

}  // namespace

Status read_trace_file(const std::string& path, TraceSet* set) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return not_found("cannot open trace file " + path);
  TraceProcess proc;
  proc.file = path;
  std::string line;
  size_t line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.empty()) continue;
    if (std::string why = read_line(line, &proc, set); !why.empty()) {
      set->warnings.push_back(path + ":" + std::to_string(line_no) + ": " + why + " (line skipped)");
    }
  }
  if (in.bad()) return data_loss("reading " + path + " failed");
  for (const std::string& e : proc.errors) set->warnings.push_back(path + ": the injection library reported: " + e);
  if (proc.dropped > 0) {
    set->warnings.push_back(path + ": CUPTI dropped " + std::to_string(proc.dropped) +
                            " kernel records (its buffers were full); totals are low");
  }
  if (!proc.ended && proc.errors.empty()) {
    set->warnings.push_back(path + ": process " + std::to_string(proc.pid) +
                            " did not exit normally (killed?): kernels after its last "
                            "synchronisation may be missing");
  }
  set->processes.push_back(std::move(proc));
  return Status::ok();
}

Result<TraceSet> read_trace_dir(const std::string& dir) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) return not_found("no trace folder " + dir);
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    if (entry.is_regular_file() && entry.path().extension() == ".jsonl") {
      files.push_back(entry.path().string());
    }
  }
  if (ec) return unavailable("listing " + dir + ": " + ec.message());
  std::sort(files.begin(), files.end());
  TraceSet set;
  for (const std::string& f : files) KILN_RETURN_IF_ERROR(read_trace_file(f, &set));
  return set;
}

std::vector<KernelStat> aggregate_kernels(const std::vector<KernelRecord>& kernels) {
  // By name and target: one kernel that serves two operators (PyTorch's layer-norm kernel runs
  // both layer_norm and rms_norm) is two rows, each with its operator's target.
  // The target is map_launch_to_target's, with a name's own target worked out once per name
  // rather than once per launch (a step can launch a kernel a million times).
  std::map<std::pair<std::string, std::string>, KernelStat> by_name;
  std::map<std::string, std::string> name_targets;
  for (const KernelRecord& k : kernels) {
    std::string target = k.range.empty() ? "" : target_of_range(k.range);
    if (target.empty()) {
      auto it = name_targets.find(k.name);
      if (it == name_targets.end())
        it = name_targets.emplace(k.name, map_kernel_to_target(k.name)).first;
      target = it->second;
    }
    KernelStat& s = by_name[{k.name, target}];
    const uint64_t d = k.duration_ns();
    if (s.calls == 0) {
      s.name = k.name;
      s.mangled = k.mangled;
      s.target = std::move(target);
      s.min_ns = d;
      s.max_ns = d;
    }
    ++s.calls;
    s.total_ns = add_ns(s.total_ns, d);
    s.min_ns = std::min(s.min_ns, d);
    s.max_ns = std::max(s.max_ns, d);
  }
  std::vector<KernelStat> out;
  out.reserve(by_name.size());
  for (auto& [key, s] : by_name) out.push_back(std::move(s));
  std::stable_sort(out.begin(), out.end(),
                   [](const KernelStat& a, const KernelStat& b) { return a.total_ns > b.total_ns; });
  return out;
}

uint64_t total_gpu_ns(const std::vector<KernelStat>& stats) {
  uint64_t total = 0;
  for (const KernelStat& s : stats) total = add_ns(total, s.total_ns);
  return total;
}

}  // namespace kiln::profile
