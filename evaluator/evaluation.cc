// The evaluation flow of one candidate. Reading order: evaluate() at the bottom drives the phases;
// run_case() runs one verification case through the sandbox and checks it; time_candidate() does
// the timed runs and re-checks their outputs.
#include "evaluator/evaluation.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <future>
#include <set>

#include "evaluator/prelude.h"
#include "evaluator/source_scan.h"

namespace kiln::eval {
namespace fs = std::filesystem;
namespace {

using Clock = std::chrono::steady_clock;
constexpr size_t kAlign = 256;
constexpr unsigned char kPoisonA = 0xFF;  // NaN in f16, bf16 and f32
constexpr unsigned char kPoisonB = 0xFE;  // NaN in f16/bf16, a huge negative number in f32

size_t align_up(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

DType arg_dtype(const TargetArg& a, DType under_test) {
  if (a.dtype == "T") return under_test;
  return parse_dtype(a.dtype).value_or(under_test);
}

// One verification case: a shape, a dtype and an input distribution.
struct CaseSpec {
  std::string stage;
  Shape shape;
  DType dtype = DType::kF32;
  Distribution dist = Distribution::kNormal;
};

enum class CaseKind { kPass, kWrong, kInputMutated, kTimeout, kCrash, kInternal };

struct CaseOutcome {
  CaseKind kind = CaseKind::kPass;
  double worst_rel = 0;
  std::string detail;
  std::vector<std::string> outputs;  // raw output bytes, when asked for (determinism)
};

// Where each tensor of one input set lives in the arena.
struct TensorSlot {
  const TargetArg* arg;
  DType dtype;
  size_t count;
  size_t offset;
  size_t after = 0;  // inputs: where the child copies them back after the run
};

std::vector<TensorSlot> layout(const TargetSpec& t, const Shape& shape, DType dtype,
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

nlohmann::json tensors_json(const std::vector<TensorSlot>& slots) {
  nlohmann::json j = nlohmann::json::array();
  for (const auto& s : slots) {
    nlohmann::json e = {{"offset", s.offset},
                        {"bytes", s.count * dtype_bytes(s.dtype)},
                        {"out", s.arg->role == TargetArg::Role::kOutput}};
    if (s.after) e["after"] = s.after;
    j.push_back(e);
  }
  return j;
}

// Kernel arguments in the calling convention: tensors, then dims, then scalars.
nlohmann::json args_json(const TargetSpec& t, const Shape& shape) {
  nlohmann::json j = nlohmann::json::array();
  int tensor = 0;
  for (const auto& a : t.args) {
    if (a.role != TargetArg::Role::kScalar) j.push_back({{"tensor", tensor++}});
  }
  for (const auto& d : t.dims) j.push_back({{"i64", shape.at(d)}});
  for (const auto* s : t.scalars()) {
    if (s->scalar_type == "i64") j.push_back({{"i64", static_cast<int64_t>(s->value)}});
    else j.push_back({{"f32", s->value}});
  }
  return j;
}

std::vector<ArgSpec> signature(const TargetSpec& t, DType dtype) {
  std::vector<ArgSpec> sig;
  for (const auto& a : t.args) {
    if (a.role == TargetArg::Role::kScalar) continue;
    sig.push_back({a.role == TargetArg::Role::kInput ? ArgSpec::Kind::kTensorIn
                                                     : ArgSpec::Kind::kTensorOut,
                   arg_dtype(a, dtype), a.name});
  }
  for (const auto& d : t.dims) sig.push_back({ArgSpec::Kind::kInt64, DType::kI64, d});
  for (const auto* s : t.scalars()) {
    sig.push_back({s->scalar_type == "i64" ? ArgSpec::Kind::kInt64 : ArgSpec::Kind::kFloat32,
                   s->scalar_type == "i64" ? DType::kI64 : DType::kF32, s->name});
  }
  return sig;
}

nlohmann::json geometry_json(const LaunchGeometry& g) {
  return {{"grid", {g.grid[0], g.grid[1], g.grid[2]}},
          {"block", {g.block[0], g.block[1], g.block[2]}},
          {"shared_bytes", g.shared_bytes}};
}

// The "time" reply's contents_of_group: one set index per group, each below `sets`.
Result<std::vector<size_t>> contents_of_group(const nlohmann::json& reply, size_t sets) {
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

std::string fmt_double(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.3g", v);
  return buf;
}

}  // namespace

// ---------------------------------------------------------------------------------------------

Result<LaunchGeometry> launch_geometry(const KernelSpec& spec, const Shape& shape, DType dtype,
                                       const std::map<std::string, std::string>& params) {
  ExprVars vars = expr_vars(shape, dtype, params);
  LaunchGeometry g;
  for (int i = 0; i < 3; ++i) {
    KILN_ASSIGN_OR_RETURN(int64_t grid, eval_int_expr(spec.grid[i], vars));
    KILN_ASSIGN_OR_RETURN(int64_t block, eval_int_expr(spec.block[i], vars));
    if (grid < 1 || grid > 0x7fffffff || block < 1 || block > 1024) {
      return invalid_argument("launch geometry out of range: grid " + std::to_string(grid) +
                              ", block " + std::to_string(block));
    }
    g.grid[i] = static_cast<uint32_t>(grid);
    g.block[i] = static_cast<uint32_t>(block);
  }
  KILN_ASSIGN_OR_RETURN(int64_t smem, eval_int_expr(spec.shared_bytes, vars));
  if (smem > (1 << 20)) return invalid_argument("shared_bytes " + std::to_string(smem) + " too large");
  g.shared_bytes = static_cast<uint32_t>(smem);
  return g;
}

Result<bool> satisfies_constraints(const KernelSpec& spec, const Shape& shape, DType dtype,
                                   const std::map<std::string, std::string>& params) {
  ExprVars vars = expr_vars(shape, dtype, params);
  for (const auto& c : spec.constraints) {
    KILN_ASSIGN_OR_RETURN(double v, eval_expr(c, vars));
    if (v == 0) return false;
  }
  return true;
}

TimingStats timing_stats(const std::vector<double>& samples_us,
                         const std::vector<double>& clocks_mhz, double throttle_fraction) {
  TimingStats s;
  double max_clock = 0;
  for (double c : clocks_mhz) max_clock = std::max(max_clock, c);
  std::vector<double> kept;
  double clock_sum = 0;
  for (size_t i = 0; i < samples_us.size(); ++i) {
    double clock = i < clocks_mhz.size() ? clocks_mhz[i] : 0;
    if (max_clock > 0 && clock > 0 && clock < throttle_fraction * max_clock) {
      ++s.dropped;  // throttled: this sample ran at a lower clock than the others
      continue;
    }
    kept.push_back(samples_us[i]);
    clock_sum += clock;
  }
  if (kept.empty()) return s;
  std::sort(kept.begin(), kept.end());
  auto quantile = [&](double q) {
    double pos = q * (kept.size() - 1);
    size_t lo = static_cast<size_t>(pos);
    size_t hi = std::min(lo + 1, kept.size() - 1);
    return kept[lo] + (kept[hi] - kept[lo]) * (pos - lo);
  };
  s.samples = static_cast<uint32_t>(kept.size());
  s.median_us = quantile(0.5);
  s.iqr_us = quantile(0.75) - quantile(0.25);
  s.min_us = kept.front();
  s.noise_rel = s.median_us > 0 ? s.iqr_us / s.median_us : 0;
  s.sm_clock_mhz = clock_sum / kept.size();
  return s;
}

// ---------------------------------------------------------------------------------------------

class CandidateEvaluator::Impl {
 public:
  TargetSpec target;
  std::string backend;
  Compiler* compiler = nullptr;
  EvaluatorOptions options;
  std::unique_ptr<Reference> reference;
  std::unique_ptr<Sandbox> sandbox;
  size_t arena_bytes = 0;
  SeedSource seeds;
  std::string scratch;  // binaries handed to the sandbox
  std::vector<DType> dtypes;

  Shape benchmark() const { return options.benchmark_override.value_or(target.benchmark); }

  Status ensure_sandbox() {
    if (sandbox && sandbox->alive()) return Status::ok();
    SandboxOptions so;
    so.kiln_binary = options.kiln_binary;
    so.backend = backend;
    so.gpu = options.gpu;
    so.arena_bytes = arena_bytes;
    KILN_ASSIGN_OR_RETURN(sandbox, Sandbox::spawn(so));
    return Status::ok();
  }

  std::vector<CaseSpec> cases_for(const std::string& stage, DType timing_dtype) const {
    std::vector<CaseSpec> cases;
    if (stage == "smoke") {
      for (const auto& s : target.smoke) cases.push_back({stage, s, timing_dtype, Distribution::kNormal});
    } else if (stage == "sweep") {
      int i = 0;
      for (const auto& s : target.sweep) {
        for (DType d : dtypes) {
          cases.push_back({stage, s, d, (i++ % 2) ? Distribution::kUniform : Distribution::kNormal});
        }
      }
    } else if (stage == "adversarial") {
      const Shape& s = target.sweep.empty() ? target.smoke.front() : target.sweep.front();
      for (Distribution d : {Distribution::kLargeMagnitude, Distribution::kSmallMagnitude,
                             Distribution::kMixedScale, Distribution::kAllEqual,
                             Distribution::kZeros, Distribution::kSpecial}) {
        cases.push_back({stage, s, timing_dtype, d});
      }
    } else if (stage == "determinism") {
      const Shape* biggest = &target.smoke.front();
      auto size = [&](const Shape& s) {
        int64_t n = 1;
        for (const auto& [k, v] : s) n *= v;
        return n;
      };
      for (const auto& s : target.sweep) if (size(s) > size(*biggest)) biggest = &s;
      cases.push_back({stage, *biggest, timing_dtype, Distribution::kNormal});
    } else if (stage == "edge") {
      for (const auto& s : target.edge) cases.push_back({stage, s, timing_dtype, Distribution::kNormal});
    }
    return cases;
  }

  // Arena bytes the verification cases need at most (each case is laid out from offset 0).
  size_t verify_bytes(DType timing_dtype) const {
    size_t most = 0;
    for (const char* stage : {"smoke", "sweep", "adversarial", "determinism", "edge"}) {
      for (const auto& c : cases_for(stage, timing_dtype)) {
        size_t cursor = 0;
        layout(target, c.shape, c.dtype, true, &cursor);
        most = std::max(most, cursor);
      }
    }
    return align_up(most);
  }

  // Arena bytes of the timing sets, which live after the verification region so that they can
  // be generated while the verification stages run.
  size_t timing_bytes(DType timing_dtype) const {
    if (!options.time) return 0;
    size_t cursor = 0;
    for (uint32_t s = 0; s < options.timing_sets; ++s) {
      layout(target, benchmark(), timing_dtype, false, &cursor);
    }
    return align_up(cursor);
  }

  size_t timing_base = 0;  // arena offset of the timing sets

  Result<LaunchGeometry> geometry(const CandidateSpec& c, const Shape& shape, DType dtype) const {
    return launch_geometry(*c.geometry, shape, dtype, c.params);
  }

  // Generates the inputs of one set into the arena and a private copy, and computes the reference.
  struct SetData {
    std::vector<TensorSlot> slots;
    std::vector<std::vector<double>> values;     // per slot; inputs only
    std::vector<uint64_t> input_checksums;       // per slot; inputs only
    std::vector<std::vector<double>> reference;  // per slot; outputs only
  };

  std::vector<SetData> timing_buffers;  // host buffers of the last timing sets, kept for reuse

  // `reuse` hands over the buffers of an earlier set of the same shape: large host vectors that
  // are allocated once per evaluator instead of page-faulted in again for every candidate.
  SetData prepare_set(std::vector<TensorSlot> slots, const Shape& shape, Distribution dist,
                      uint64_t seed, SetData reuse = {}) {
    SetData d = std::move(reuse);
    d.slots = std::move(slots);
    d.values.resize(d.slots.size());
    d.input_checksums.resize(d.slots.size());
    d.reference.resize(d.slots.size());
    unsigned char* arena = sandbox->arena();
    for (size_t i = 0; i < d.slots.size(); ++i) {
      const TensorSlot& s = d.slots[i];
      if (s.arg->role != TargetArg::Role::kInput) continue;
      d.values[i].resize(s.count);
      // Each input gets its own stream; the seed never leaves this process.
      generate(dist, s.dtype, seed + 0x9E3779B97F4A7C15ull * (i + 1), s.count, d.values[i].data(),
               arena + s.offset);
      d.input_checksums[i] = checksum(arena + s.offset, s.count * dtype_bytes(s.dtype));
    }
    return d;
  }

  void compute_reference(SetData& d, const Shape& shape) const {
    std::vector<const double*> in;
    std::vector<double*> out;
    for (size_t i = 0; i < d.slots.size(); ++i) {
      if (d.slots[i].arg->role == TargetArg::Role::kInput) in.push_back(d.values[i].data());
    }
    for (size_t i = 0; i < d.slots.size(); ++i) {
      if (d.slots[i].arg->role != TargetArg::Role::kOutput) continue;
      d.reference[i].assign(d.slots[i].count, 0.0);
      out.push_back(d.reference[i].data());
    }
    std::vector<int64_t> dims;
    for (const auto& name : target.dims) dims.push_back(shape.at(name));
    std::vector<double> scalars;
    for (const auto* s : target.scalars()) scalars.push_back(s->value);
    reference->compute(in, out, dims, scalars);
  }

  // Checks outputs against the reference; returns the worst relative error and a failure detail.
  CaseOutcome check_outputs(const SetData& d, DType dtype, unsigned char poison) const {
    return check_outputs_against(d.slots, d, dtype, poison);
  }

  // Checks the outputs that lie at `slots` (one set's layout) against the reference of
  // `expected`, a set of the same shape and dtype: with rotated timing contents a group's buffers
  // end up holding another set's inputs.
  CaseOutcome check_outputs_against(const std::vector<TensorSlot>& slots, const SetData& expected,
                                    DType dtype, unsigned char poison) const {
    CaseOutcome o;
    const unsigned char* arena = sandbox->arena();
    for (size_t i = 0; i < slots.size(); ++i) {
      const TensorSlot& s = slots[i];
      if (s.arg->role != TargetArg::Role::kOutput) continue;
      CompareResult c = compare(s.dtype, arena + s.offset, expected.reference[i].data(), s.count,
                                target.tolerance.at(dtype), poison, s.arg->name);
      o.worst_rel = std::max(o.worst_rel, c.worst_rel_error);
      if (!c.passed && o.kind == CaseKind::kPass) {
        o.kind = CaseKind::kWrong;
        o.detail = c.detail;
      }
    }
    return o;
  }

  CaseOutcome call_failed(const Status& s, const std::string& what) {
    CaseOutcome o;
    o.kind = s.code() == StatusCode::kDeadlineExceeded ? CaseKind::kTimeout
             : s.code() == StatusCode::kUnavailable    ? CaseKind::kCrash
                                                        : CaseKind::kInternal;
    o.detail = what + ": " + s.message();
    return o;
  }

  CaseOutcome reply_failed(const nlohmann::json& reply, const std::string& what) {
    CaseOutcome o;
    // A launch the device refuses (bad geometry, too many resources) or a sticky fault is the
    // candidate's doing: both count as a crash of the candidate.
    o.kind = CaseKind::kCrash;
    o.detail = what + ": " + reply.value("error", std::string("sandbox reported a failure"));
    if (reply.value("fatal", false) && sandbox) sandbox->kill_child();
    return o;
  }

  CaseOutcome run_case(KernelHandle handle, const CandidateSpec& c, const CaseSpec& cs,
                       unsigned char poison, bool keep_outputs, uint64_t seed) {
    Result<LaunchGeometry> g = geometry(c, cs.shape, cs.dtype);
    if (!g.is_ok()) return {CaseKind::kCrash, 0, "launch geometry: " + g.status().message(), {}};
    size_t cursor = 0;
    SetData d = prepare_set(layout(target, cs.shape, cs.dtype, true, &cursor), cs.shape, cs.dist, seed);
    // The reference runs here while the child runs the candidate.
    auto ref = std::async(std::launch::async, [&] { compute_reference(d, cs.shape); });
    nlohmann::json req = geometry_json(*g);
    req["op"] = "run";
    req["handle"] = handle;
    req["args"] = args_json(target, cs.shape);
    req["tensors"] = tensors_json(d.slots);
    req["poison"] = poison;
    Result<nlohmann::json> reply = sandbox->call(req, options.phase_timeout_ms);
    ref.wait();
    std::string what = cs.stage + " " + shape_string(cs.shape) + " " + std::string(dtype_name(cs.dtype)) +
                       " " + std::string(distribution_name(cs.dist));
    if (!reply.is_ok()) return call_failed(reply.status(), what);
    if (!reply->value("ok", false)) return reply_failed(*reply, what);
    const unsigned char* arena = sandbox->arena();
    for (size_t i = 0; i < d.slots.size(); ++i) {
      const TensorSlot& s = d.slots[i];
      if (s.arg->role != TargetArg::Role::kInput) continue;
      if (checksum(arena + s.after, s.count * dtype_bytes(s.dtype)) != d.input_checksums[i]) {
        return {CaseKind::kInputMutated, 0,
                what + ": input '" + s.arg->name + "' was modified by the kernel", {}};
      }
    }
    CaseOutcome o = check_outputs(d, cs.dtype, poison);
    if (o.kind != CaseKind::kPass) o.detail = what + ": " + o.detail;
    if (keep_outputs) {
      for (const auto& s : d.slots) {
        if (s.arg->role != TargetArg::Role::kOutput) continue;
        o.outputs.emplace_back(reinterpret_cast<const char*>(arena + s.offset),
                               s.count * dtype_bytes(s.dtype));
      }
    }
    return o;
  }
};

// ---------------------------------------------------------------------------------------------

Result<std::unique_ptr<CandidateEvaluator>> CandidateEvaluator::create(const TargetSpec& target,
                                                                       std::string backend,
                                                                       Compiler& compiler,
                                                                       EvaluatorOptions options) {
  const BackendSpec* b = target.backend(backend);
  if (!b) {
    return invalid_argument("target '" + target.name + "' has no kernels for the " + backend +
                            " backend");
  }
  std::unique_ptr<CandidateEvaluator> e(new CandidateEvaluator());
  e->impl_ = std::make_unique<Impl>();
  Impl& impl = *e->impl_;
  impl.target = target;
  impl.backend = backend;
  impl.compiler = &compiler;
  impl.options = std::move(options);
  impl.dtypes = b->dtypes;
  std::error_code ec;
  fs::create_directories(impl.options.cache_dir, ec);
  if (ec) return unavailable("creating cache dir " + impl.options.cache_dir + ": " + ec.message());
  impl.scratch = impl.options.cache_dir + "/binaries";
  fs::create_directories(impl.scratch, ec);
  KILN_ASSIGN_OR_RETURN(impl.reference, Reference::build(impl.target, impl.options.cache_dir));
  size_t timing = 0;
  for (DType d : b->dtypes) {
    impl.timing_base = std::max(impl.timing_base, impl.verify_bytes(d));
    timing = std::max(timing, impl.timing_bytes(d));
  }
  impl.arena_bytes = impl.timing_base + timing + (1 << 20);
  KILN_RETURN_IF_ERROR(impl.ensure_sandbox().with_context("starting the sandbox"));
  e->arch_ = impl.sandbox->arch();
  e->device_name_ = impl.sandbox->device_name();
  return e;
}

CandidateEvaluator::~CandidateEvaluator() = default;

namespace {

proto::Outcome outcome_of(CaseKind k) {
  switch (k) {
    case CaseKind::kPass: return proto::Outcome::kVerified;
    case CaseKind::kWrong: return proto::Outcome::kWrongAnswer;
    case CaseKind::kInputMutated: return proto::Outcome::kRejected;
    case CaseKind::kTimeout: return proto::Outcome::kTimeout;
    case CaseKind::kCrash: return proto::Outcome::kCrash;
    case CaseKind::kInternal: return proto::Outcome::kInternalError;
  }
  return proto::Outcome::kInternalError;
}

}  // namespace

Result<std::vector<std::pair<DType, CompileRequest>>> CandidateEvaluator::compile_requests(
    const CandidateSpec& c, DType timing_dtype) const {
  const Impl& m = *impl_;
  // Untrusted text is compiled outside the sandbox, so nothing compiles before the scan passes.
  if (!scan_source(c.source, m.backend).empty()) {
    return invalid_argument("the source has static-scan findings; it is not compiled");
  }
  std::vector<std::pair<DType, CompileRequest>> out;
  std::vector<DType> order = {timing_dtype};
  for (DType d : m.dtypes) if (d != timing_dtype) order.push_back(d);
  for (DType d : order) {
    KILN_ASSIGN_OR_RETURN(std::string macro, dtype_macro(m.backend, d));
    CompileRequest req;
    req.source = with_prelude(m.backend, c.source);
    req.kernel_name = c.kernel_name;
    req.defines = c.params;
    req.defines["KILN_DTYPE"] = macro;
    req.arch = arch_;
    req.signature = signature(m.target, d);
    out.emplace_back(d, std::move(req));
  }
  return out;
}

proto::EvaluationResult CandidateEvaluator::evaluate(const CandidateSpec& c, DType timing_dtype,
                                                     const ProgressFn& progress) {
  Impl& m = *impl_;
  const auto start = Clock::now();
  proto::EvaluationResult r;
  r.arch = arch_;
  auto say = [&](const std::string& line) { if (progress) progress(line); };
  auto finish = [&](proto::Outcome outcome) {
    r.outcome = outcome;
    r.wall_ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
    return r;
  };
  auto stage = [&](std::string name, bool passed, std::string detail, double worst, uint32_t cases) {
    say(name + ": " + (passed ? "passed" : "FAILED") + " (" + std::to_string(cases) + " case" +
        (cases == 1 ? "" : "s") + (worst > 0 ? ", worst rel error " + fmt_double(worst) : "") + ")" +
        (detail.empty() ? "" : " -- " + detail));
    r.stages.push_back({std::move(name), passed, std::move(detail), worst, cases});
  };
  if (c.geometry == nullptr) {
    r.log = "candidate has no launch geometry";
    return finish(proto::Outcome::kInternalError);
  }
  if (std::find(m.dtypes.begin(), m.dtypes.end(), timing_dtype) == m.dtypes.end()) {
    r.log = "the " + m.backend + " kernels of '" + m.target.name + "' do not support " +
            std::string(dtype_name(timing_dtype));
    return finish(proto::Outcome::kInternalError);
  }

  // Static scan (THREATS.md rows 5 and 7): refused before anything compiles the text.
  std::vector<ScanFinding> findings = scan_source(c.source, m.backend);
  if (!findings.empty()) {
    std::string detail;
    for (const auto& f : findings) {
      detail += (detail.empty() ? "" : "; ") + f.rule + " at line " + std::to_string(f.line);
    }
    stage("scan", false, detail, 0, 1);
    return finish(proto::Outcome::kRejected);
  }
  stage("scan", true, "", 0, 1);

  // Compile once per dtype the backend's kernels support (the sweep covers them all).
  Result<std::vector<std::pair<DType, CompileRequest>>> requests = compile_requests(c, timing_dtype);
  if (!requests.is_ok()) {
    r.log = requests.status().message();
    return finish(proto::Outcome::kInternalError);
  }
  std::map<DType, KernelHandle> handles;
  auto unload_all = [&] {
    if (!m.sandbox || !m.sandbox->alive()) return;
    for (const auto& [d, h] : handles) {
      m.sandbox->call({{"op", "unload"}, {"handle", h}}, m.options.phase_timeout_ms).status().ignore();
    }
  };
  double compile_ms = 0;
  for (const auto& [d, req] : *requests) {
    CompileOutput out = m.compiler->compile(req);
    compile_ms += out.compile_ms;
    if (!out.ok) {
      stage("compile", false, std::string(dtype_name(d)) + (out.rejected ? ": refused" : ""), 0, 1);
      r.log = out.log;
      unload_all();
      return finish(out.rejected ? proto::Outcome::kRejected : proto::Outcome::kCompileError);
    }
    std::string path = m.scratch + "/" + out.cache_key + (m.backend == "cuda" ? ".cubin" : ".so");
    if (!fs::exists(path)) {
      std::string tmp = path + ".tmp" + std::to_string(getpid());
      std::ofstream(tmp, std::ios::binary) << out.binary;
      fs::rename(tmp, path);
    }
    if (Status s = m.ensure_sandbox(); !s.is_ok()) {
      r.log = s.message();
      return finish(proto::Outcome::kInternalError);
    }
    Result<nlohmann::json> loaded =
        m.sandbox->call({{"op", "load"}, {"path", path}, {"kernel", c.kernel_name}},
                        m.options.phase_timeout_ms);
    if (!loaded.is_ok() || !loaded->value("ok", false)) {
      std::string why = loaded.is_ok() ? loaded->value("error", std::string("?")) : loaded.status().message();
      stage("load", false, why, 0, 1);
      r.log = why;
      return finish(loaded.is_ok() ? proto::Outcome::kCrash : outcome_of(m.call_failed(loaded.status(), "load").kind));
    }
    handles[d] = loaded->value("handle", KernelHandle{0});
  }
  r.metrics["compile_ms"] = compile_ms;
  // Where the wall time goes (compile+load, verification, timing), for the evaluation-rate bench.
  auto phase_ms = [&start] { return std::chrono::duration<double, std::milli>(Clock::now() - start).count(); };
  r.metrics["prepare_ms"] = phase_ms();
  stage("compile", true, "", 0, static_cast<uint32_t>(requests->size()));

  // The timing inputs (several sets at the benchmark shape: the largest host-side job of an
  // evaluation) are generated while the verification stages run, in their own arena region.
  // Seeds are drawn here, on this thread: SeedSource is not thread-safe.
  const Shape bench = m.benchmark();
  std::future<std::vector<Impl::SetData>> timing_inputs;
  if (m.options.time) {
    std::vector<uint64_t> seeds;
    for (uint32_t s = 0; s < m.options.timing_sets; ++s) seeds.push_back(m.seeds.next());
    std::vector<Impl::SetData> reuse = std::move(m.timing_buffers);
    reuse.resize(seeds.size());
    timing_inputs = std::async(std::launch::async, [&m, bench, timing_dtype, seeds,
                                                    reuse = std::move(reuse)]() mutable {
      size_t cursor = m.timing_base;
      std::vector<Impl::SetData> sets;
      for (size_t s = 0; s < seeds.size(); ++s) {
        Distribution dist = s % 2 ? Distribution::kUniform : Distribution::kNormal;
        sets.push_back(m.prepare_set(layout(m.target, bench, timing_dtype, false, &cursor), bench,
                                     dist, seeds[s], std::move(reuse[s])));
      }
      return sets;
    });
  }

  // The five verification stages; the first failing stage ends the evaluation.
  for (const char* name : {"smoke", "sweep", "adversarial", "determinism", "edge"}) {
    std::vector<CaseSpec> cases = m.cases_for(name, timing_dtype);
    double worst = 0;
    for (const CaseSpec& cs : cases) {
      const bool determinism = std::string(name) == "determinism";
      uint64_t seed = m.seeds.next();
      CaseOutcome o = m.run_case(handles[cs.dtype], c, cs, kPoisonA, determinism, seed);
      if (o.kind == CaseKind::kPass && determinism) {
        // Same inputs, re-poisoned with another pattern: the bits must not change (THREATS.md
        // row 11: reading uninitialized memory, races).
        CaseOutcome again = m.run_case(handles[cs.dtype], c, cs, kPoisonB, true, seed);
        if (again.kind != CaseKind::kPass) {
          o = again;
        } else if (again.outputs != o.outputs) {
          o.kind = CaseKind::kWrong;
          o.detail = "outputs differ bitwise between two runs on the same inputs";
        }
      }
      worst = std::max(worst, o.worst_rel);
      if (o.kind != CaseKind::kPass) {
        stage(name, false, o.detail, worst, static_cast<uint32_t>(cases.size()));
        r.log = o.detail;
        unload_all();
        return finish(outcome_of(o.kind));
      }
    }
    // What the stage covered: its shapes, dtypes and input distributions.
    std::set<std::string> shapes, dtypes_seen, dists;
    for (const CaseSpec& cs : cases) {
      shapes.insert(shape_string(cs.shape));
      dtypes_seen.insert(std::string(dtype_name(cs.dtype)));
      dists.insert(std::string(distribution_name(cs.dist)));
    }
    auto join = [](const std::set<std::string>& items) {
      std::string out;
      for (const auto& i : items) out += (out.empty() ? "" : " ") + i;
      return out;
    };
    stage(name, true, "shapes " + join(shapes) + "; dtypes " + join(dtypes_seen) + "; inputs " + join(dists),
          worst, static_cast<uint32_t>(cases.size()));
  }

  r.metrics["verified_at_ms"] = phase_ms();
  if (m.options.time) {
    Result<LaunchGeometry> g = m.geometry(c, bench, timing_dtype);
    if (!g.is_ok()) {
      stage("timed_outputs", false, g.status().message(), 0, 0);
      unload_all();
      return finish(proto::Outcome::kCrash);
    }
    // Several independent input sets; with two or more, the child also rotates their contents
    // through the launched buffers, so a result cached on a pointer (or from warm-up) is stale
    // by the last launch (THREATS.md rows 3 and 8); random non-zero data (row 13).
    std::vector<Impl::SetData> sets = timing_inputs.get();
    nlohmann::json sets_json = nlohmann::json::array();
    for (const auto& set : sets) sets_json.push_back(tensors_json(set.slots));
    // Each group's closing launch runs on its set's inputs with one element changed (chosen here,
    // from a seed the candidate never sees), so the checked outputs come from contents no earlier
    // launch had: a result cached under the pointer or a sample of the inputs shows up stale.
    nlohmann::json patches = nlohmann::json::array();
    for (size_t s = 0; s < sets.size() && sets.size() >= 2; ++s) {
      Impl::SetData& d = sets[s];
      for (size_t i = 0; i < d.slots.size(); ++i) {
        const TensorSlot& slot = d.slots[i];
        if (slot.arg->role != TargetArg::Role::kInput) continue;
        const size_t e = m.seeds.next() % slot.count;
        const double v = d.values[i][e];
        const double changed = round_to(slot.dtype, v >= 0 ? v - 4.0 : v + 4.0);
        d.values[i][e] = changed;
        std::string bytes(dtype_bytes(slot.dtype), '\0');
        encode(slot.dtype, &changed, 1, bytes.data());
        std::vector<unsigned> byte_list(bytes.begin(), bytes.end());
        for (auto& b : byte_list) b &= 0xFF;
        patches.push_back({{"set", s}, {"tensor", i}, {"offset", e * dtype_bytes(slot.dtype)},
                           {"bytes", byte_list}});
        break;  // one element of the first input is enough to make the contents new
      }
    }
    r.metrics["inputs_ready_at_ms"] = phase_ms();
    // The references (one thread per set: reference code is single-threaded) run while the child
    // times the candidate.
    std::vector<std::future<void>> refs;
    for (auto& set : sets) {
      refs.push_back(std::async(std::launch::async, [&m, &set, &bench] { m.compute_reference(set, bench); }));
    }
    nlohmann::json req = geometry_json(*g);
    req.update({{"op", "time"}, {"handle", handles[timing_dtype]}, {"args", args_json(m.target, bench)},
                {"sets", sets_json}, {"warmup", m.options.warmup}, {"min_samples", m.options.min_samples},
                {"max_samples", m.options.max_samples}, {"max_ms", m.options.max_timing_ms},
                {"target_noise_rel", m.options.target_noise_rel}, {"flush_l2", m.options.flush_l2},
                {"poison", kPoisonA}, {"rotate_contents", sets.size() >= 2}});
    if (!patches.empty()) req["final"] = patches;
    uint32_t timeout = m.options.phase_timeout_ms + m.options.max_timing_ms * 2;
    Result<nlohmann::json> reply = m.sandbox->call(req, timeout);
    r.metrics["timed_at_ms"] = phase_ms();
    for (auto& f : refs) f.wait();
    r.metrics["references_at_ms"] = phase_ms();
    std::string what = "timing " + shape_string(bench) + " " + std::string(dtype_name(timing_dtype));
    CaseOutcome failed;
    if (!reply.is_ok()) failed = m.call_failed(reply.status(), what);
    else if (!reply->value("ok", false)) failed = m.reply_failed(*reply, what);
    if (failed.kind != CaseKind::kPass) {
      stage("timed_outputs", false, failed.detail, 0, 0);
      r.log = failed.detail;
      unload_all();
      return finish(outcome_of(failed.kind));
    }
    // Which set's inputs each group held at its last launch: the reference to check it against.
    Result<std::vector<size_t>> contents = contents_of_group(*reply, sets.size());
    if (!contents.is_ok()) {
      std::string detail = what + ": " + contents.status().message();
      stage("timed_outputs", false, detail, 0, 0);
      r.log = detail;
      unload_all();
      return finish(proto::Outcome::kInternalError);
    }
    // The outputs of the timed launches must be right too (THREATS.md rows 3 and 8).
    double worst = 0;
    for (size_t g = 0; g < sets.size(); ++g) {
      CaseOutcome o =
          m.check_outputs_against(sets[g].slots, sets[(*contents)[g]], timing_dtype, kPoisonA);
      worst = std::max(worst, o.worst_rel);
      if (o.kind != CaseKind::kPass) {
        stage("timed_outputs", false, what + ": " + o.detail, worst, static_cast<uint32_t>(sets.size()));
        r.log = o.detail;
        unload_all();
        return finish(proto::Outcome::kWrongAnswer);
      }
    }
    stage("timed_outputs", true, "", worst, static_cast<uint32_t>(sets.size()));
    m.timing_buffers = std::move(sets);  // their host buffers serve the next candidate

    TimingStats t = timing_stats((*reply)["samples_us"].get<std::vector<double>>(),
                                 (*reply)["clocks_mhz"].get<std::vector<double>>(),
                                 m.options.throttle_fraction);
    r.timing = {t.median_us, t.iqr_us, t.min_us, t.samples, t.noise_rel, t.sm_clock_mhz, t.dropped};
    ExprVars vars = expr_vars(bench, timing_dtype, c.params);
    double bytes = eval_expr(m.target.bytes_expr, vars).value_or(0);
    double flops = eval_expr(m.target.flops_expr, vars).value_or(0);
    r.metrics["bytes"] = bytes;
    r.metrics["flops"] = flops;
    if (t.median_us > 0) {
      r.metrics["bytes_per_s"] = bytes / (t.median_us * 1e-6);
      r.metrics["flops_per_s"] = flops / (t.median_us * 1e-6);
    }
    // The physical floor (THREATS.md row 9): faster than moving the bytes at the measured
    // bandwidth, or doing the flops at the measured matrix rate, is impossible.
    double floor_us = 0;
    if (m.options.bandwidth_bytes_per_s > 0) floor_us = bytes / m.options.bandwidth_bytes_per_s * 1e6;
    if (m.options.matrix_flops_per_s > 0) {
      floor_us = std::max(floor_us, flops / m.options.matrix_flops_per_s * 1e6);
    }
    if (floor_us > 0 && t.median_us > 0) {
      r.metrics["floor_us"] = floor_us;
      r.metrics["fraction_of_floor"] = floor_us / t.median_us;
      // 3% below the floor is allowed for ceiling measurement noise.
      if (t.median_us < 0.97 * floor_us) {
        stage("floor", false, "median " + fmt_double(t.median_us) + " us is below the physical floor of " +
                                  fmt_double(floor_us) + " us: impossible, rejected", 0, 1);
        unload_all();
        return finish(proto::Outcome::kRejected);
      }
      stage("floor", true, "", 0, 1);
    }
    say("time: median " + fmt_double(t.median_us) + " us, IQR " + fmt_double(t.iqr_us) + " us, " +
        std::to_string(t.samples) + " samples (" + std::to_string(t.dropped) + " dropped), noise " +
        fmt_double(t.noise_rel * 100) + "%");
  }
  unload_all();
  return finish(proto::Outcome::kVerified);
}

}  // namespace kiln::eval
