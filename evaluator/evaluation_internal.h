// Internals of the evaluation flow, shared by the evaluation_*.cc files only:
// CandidateEvaluator::Impl, which runs one verification case (run_case) and holds the evaluator's
// sandbox, reference and reusable buffers. The request and reply pieces are in evaluation_wire.h.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <optional>
#include <set>

#include "evaluator/evaluation.h"
#include "evaluator/evaluation_wire.h"
#include "evaluator/tensor_data.h"
#include "evaluator/verification_cases.h"
#include "shared/expr.h"

namespace kiln::eval {

// Only the evaluation's own files include this header, so the names of evaluation_wire.h are
// brought in unqualified here.
using namespace evaluation_internal;  // NOLINT(build/namespaces)

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

  // The shape timed: the candidate's (a sweep's shape), else the override, else the target's.
  Shape benchmark() const {
    if (timing_shape) return *timing_shape;
    return options.benchmark_override.value_or(target.benchmark);
  }
  std::optional<Shape> timing_shape;  // CandidateSpec::shape of the evaluation under way

  // Arena bytes the verification region and the timing sets at benchmark() need.
  size_t needed_arena_bytes() const {
    size_t timing = 0;
    for (DType d : dtypes) timing = std::max(timing, timing_bytes(d));
    return timing_base + timing + (1 << 20);
  }
  // Grows the arena (a new sandbox child) when the timing shape needs more than it has; the arena
  // never shrinks, so a sweep's shapes settle on the largest one's size. INVALID_ARGUMENT for a
  // shape over options.max_arena_bytes.
  Status fit_arena();

  Status ensure_sandbox() {
    if (sandbox && sandbox->alive()) return Status::ok();
    SandboxOptions so;
    so.kiln_binary = options.kiln_binary;
    so.backend = backend;
    so.gpu = options.gpu;
    so.arena_bytes = arena_bytes;
    KILN_ASSIGN_OR_RETURN(sandbox, Sandbox::spawn(so));
    ++sandbox_generation;
    return Status::ok();
  }
  uint64_t sandbox_generation = 0;  // sandbox children spawned: a loaded handle is one child's

  std::vector<CaseSpec> cases_for(const std::string& stage, DType timing_dtype) const {
    return verification_cases(target, dtypes, stage, timing_dtype);
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
    check_layouts(timing_dtype, &cursor);
    return align_up(cursor);
  }

  // The arena places of the outputs of kept timing launches, one layout per check slot, from
  // `*cursor` on (only the outputs' offsets are meaningful); none without input rotation.
  std::vector<std::vector<TensorSlot>> check_layouts(DType timing_dtype, size_t* cursor) const {
    std::vector<std::vector<TensorSlot>> slots;
    if (options.timing_sets < 2) return slots;
    for (uint32_t c = 0; c < kCheckSlots; ++c) {
      size_t unused = 0;
      std::vector<TensorSlot> l = layout(target, benchmark(), timing_dtype, false, &unused);
      for (TensorSlot& s : l) {
        if (s.arg->role != TargetArg::Role::kOutput) continue;
        s.offset = *cursor;
        *cursor += align_up(s.count * dtype_bytes(s.dtype));
      }
      slots.push_back(std::move(l));
    }
    return slots;
  }

  size_t timing_base = 0;  // arena offset of the timing sets

  Result<LaunchGeometry> geometry(const CandidateSpec& c, const Shape& shape, DType dtype) const {
    return launch_geometry(*c.geometry, shape, dtype, c.params);
  }
  // The launch's arguments at `shape`: tensors, dims and scalars, then the tensor maps the kernel
  // takes with its parameters (an error names a map its configuration cannot have).
  Result<nlohmann::json> launch_args(const CandidateSpec& c, const Shape& shape,
                                     DType dtype) const {
    nlohmann::json args = args_json(target, shape);
    KILN_ASSIGN_OR_RETURN(std::vector<TensorMapArg> maps,
                          tensor_maps_at(target, c.geometry->tensor_maps, c.params, shape, dtype));
    for (const TensorMapArg& m : maps) args.push_back(tensor_map_json(m));
    return args;
  }

  // Generates the inputs of one set into the arena and a private copy, and computes the reference.
  struct SetData {
    std::vector<TensorSlot> slots;
    std::vector<std::vector<double>> values;     // per slot; inputs only
    std::vector<uint64_t> input_checksums;       // per slot; inputs only
    std::vector<std::vector<double>> reference;  // per slot; outputs only
    // Only for a tolerance with a terms term: the reference on the squared inputs, its outputs
    // turned into norms (term_norms_from_squares). `squares` holds the inputs squared (index inputs
    // as they are). prepare_set and choose_sites clear squares_built (the next reference squares
    // every input); between draws of sites only the sites' elements of `values` change (the kept
    // launches' masks), so only those are squared again.
    std::vector<std::vector<double>> term_norms;  // per slot; outputs only
    std::vector<std::vector<double>> squares;     // per slot; inputs only
    bool squares_built;  // set by prepare_set (a default initializer here breaks `reuse = {}`)
    Shape shape;
    // Not empty: the reference was computed for these rows (of every output's first dim) only,
    // and only they are compared (see Reference::has_rows).
    std::vector<int64_t> rows;
    std::vector<Site> sites;  // timing sets: the sites launches change (choose_sites)
  };

  std::vector<SetData> timing_buffers;  // host buffers of the last timing sets, kept for reuse

  // Writes a compiled binary where the sandbox can read it (once per cache key) and loads its
  // `kernel`: the child's reply ({"ok":true,"handle":h} or an error), or why the call failed.
  Result<nlohmann::json> load_binary(const CompileOutput& out, const std::string& kernel) {
    const std::string path = scratch + "/" + out.cache_key + (backend == "cuda" ? ".cubin" : ".so");
    if (!std::filesystem::exists(path)) {
      const std::string tmp = path + ".tmp" + std::to_string(getpid());
      std::ofstream(tmp, std::ios::binary) << out.binary;
      std::filesystem::rename(tmp, path);
    }
    return sandbox->call({{"op", "load"}, {"path", path}, {"kernel", kernel}},
                         options.phase_timeout_ms);
  }

  // The precision stage (evaluation_precision.cc, docs/threats.md row 10): the backend's seed runs
  // on the inputs of each sweep case in the timed dtype right after the candidate (a Companion
  // of run_case), and the candidate's worst and RMS error against the reference may be at most
  // the target's precision_factor times the seed's.
  using StageFn = std::function<void(std::string, bool, std::string, double, uint32_t)>;
  struct PrecisionSample {
    Shape shape;
    DType dtype;
    Distribution dist;
    CaseOutcome mine, theirs;  // both with the reference's statistics
  };
  // The seed as a candidate (trusted text: never scanned), and whether `c` is it.
  CandidateSpec seed_candidate() const;
  bool is_seed(const CandidateSpec& c) const;
  // The seed's kernel in `dtype`, compiled (through the cache) and loaded once per sandbox child.
  Result<KernelHandle> seed_kernel(DType dtype);
  struct LoadedSeed {
    uint64_t generation = 0;
    KernelHandle handle = 0;
  };
  std::map<DType, LoadedSeed> seed_kernels;
  // Judges the samples; `not_compared` non-empty: no comparison was possible (it says why).
  // Reports the stage through `stage`; returns the outcome when it fails.
  std::optional<proto::Outcome> precision_verdict(const std::vector<PrecisionSample>& samples,
                                                  const std::string& not_compared,
                                                  const StageFn& stage, std::string* log) const;
  double precision_factor() const { return target.precision_factor; }

  // The timing phase (evaluation_timing.cc): times the loaded kernel on `sets` (the timing inputs,
  // already in the arena) with sites and kept launches, checks the outputs of the closing and the
  // kept launches, judges the samples and the physical floor, and profiles when asked. Fills
  // `r` (timing, metrics, stages through `stage`); returns the outcome when the evaluation ends
  // here with a failure, nothing when the candidate stays verified.
  std::optional<proto::Outcome> time_phase(const CandidateSpec& c, KernelHandle handle, DType dtype,
                                           std::vector<SetData> sets, proto::EvaluationResult* r,
                                           const StageFn& stage,
                                           const std::function<void(const std::string&)>& say,
                                           bool has_progress,
                                           const std::function<double()>& phase_ms);
  // Picks the sites of a timing set (inputs only, index inputs left alone) and applies them all
  // to its values: the contents of the closing launch.
  std::vector<Site> choose_sites(SetData& d);
  // Rows (of row_dims) each site changes: its own row where its input has every row dim, else up
  // to kRowsPerSite drawn among those agreeing with it on the row dims it has; none for a site
  // whose input has no row dim (it changes every row).
  std::vector<int64_t> site_rows(const SetData& d);

  // The profile phase (evaluation_profile.cc): one more launch of the timed kernel on the
  // timing inputs at `tensors` (one set's layout, still in the arena), profiled in the child;
  // its values, class and note go into `r`. Never changes the outcome: a profile that cannot be
  // taken leaves a note. The notice about missing counters is said once per evaluator: through
  // `say` when the caller shows progress, else in the log.
  void profile_phase(KernelHandle handle, const LaunchGeometry& geometry,
                     const nlohmann::json& args, const nlohmann::json& tensors,
                     proto::EvaluationResult* r, const std::function<void(const std::string&)>& say,
                     bool has_progress);
  bool profile_notice_said = false;

  // `reuse` hands over the buffers of an earlier set of the same shape: large host vectors that
  // are allocated once per evaluator instead of page-faulted in again for every candidate.
  SetData prepare_set(std::vector<TensorSlot> slots, const Shape& shape, Distribution dist,
                      uint64_t seed, SetData reuse = {});

  // Runs the reference on `d`'s inputs at `shape` (on d.rows only where not empty) into
  // d.reference and, where a tolerance of the target has a terms term, the norms of the terms into
  // d.term_norms (evaluation_sets.cc).
  // Fails where the reference did not return (Reference::compute): the target is broken.
  Status compute_reference(SetData& d, const Shape& shape) const;
  // The terms part of compute_reference: d.term_norms for d.rows (every row when empty), from
  // the reference's kiln_reference_terms where it has one, else from the reference on the
  // squared inputs. `in`, `dims`, `scalars` as the reference got them.
  Status compute_term_norms(SetData& d, const Shape& shape, const std::vector<const double*>& in,
                            const std::vector<int64_t>& dims,
                            const std::vector<double>& scalars) const;

  // The dims whose flattened index is a row of the reference (target.json's reference_rows, else
  // the outputs' first dim when they share it; empty when they do not).
  std::vector<std::string> row_dims() const { return reference_row_dims(target); }
  // How many rows the outputs have at `shape` (0: no rows).
  int64_t row_count(const Shape& shape) const {
    const std::vector<std::string> dims = row_dims();
    if (dims.empty()) return 0;
    int64_t n = 1;
    for (const auto& d : dims) n *= shape.at(d);
    return n;
  }

  // The rows of the outputs' shared first dim that a sampled check of `shape` looks at: `count`
  // distinct rows drawn from the evaluator's seeds plus every row in `must_include` (the rows of
  // the sites a launch changed), sorted; every row when there are few anyway (through the row
  // reference, which spreads them over threads, where the full one runs on one); empty (the full
  // reference) when the reference cannot compute single rows or the outputs do not share their
  // first dim.
  std::vector<int64_t> sampled_rows(const Shape& shape, size_t count,
                                    const std::vector<int64_t>& must_include);

  // Checks outputs against the reference; returns the worst relative error and a failure detail.
  CaseOutcome check_outputs(const SetData& d, DType dtype, unsigned char poison,
                            bool ref_stats = false) const {
    return check_outputs_against(d.slots, d, dtype, poison, ref_stats);
  }

  // Checks the outputs that lie at `slots` (one set's layout) against the reference of
  // `expected`, a set of the same shape and dtype: with rotated timing contents a group's buffers
  // end up holding another set's inputs.
  CaseOutcome check_outputs_against(const std::vector<TensorSlot>& slots, const SetData& expected,
                                    DType dtype, unsigned char poison,
                                    bool ref_stats = false) const;

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

  // Runs `c` once on the tensors of `d` (already in the arena): a pass, or why the run failed
  // (the launch, the reply, a guard region). The outputs are left for the caller to check.
  CaseOutcome launch_case(KernelHandle handle, const CandidateSpec& c, const CaseSpec& cs,
                          const SetData& d, unsigned char poison, const std::string& what) {
    Result<LaunchGeometry> g = geometry(c, cs.shape, cs.dtype);
    if (!g.is_ok()) return {CaseKind::kCrash, 0, "launch geometry: " + g.status().message(), {}};
    Result<nlohmann::json> args = launch_args(c, cs.shape, cs.dtype);
    if (!args.is_ok()) return {CaseKind::kCrash, 0, args.status().message(), {}};
    nlohmann::json req = geometry_json(*g);
    req["op"] = "run";
    req["handle"] = handle;
    req["args"] = std::move(args).value();
    req["tensors"] = tensors_json(d.slots);
    req["poison"] = poison;
    Result<nlohmann::json> reply = sandbox->call(req, options.phase_timeout_ms);
    if (!reply.is_ok()) return call_failed(reply.status(), what);
    if (!reply->value("ok", false)) return reply_failed(*reply, what);
    if (std::string oob = guard_violations(*reply, d.slots); !oob.empty()) {
      return {CaseKind::kOutOfBounds, 0, what + ": " + oob, {}};
    }
    return {};
  }

  // Another kernel run on a case's inputs right after the candidate passed it (the precision
  // stage's seed): its outcome, with the reference's statistics, goes to `*out`.
  struct Companion {
    KernelHandle handle;
    const CandidateSpec* spec;
    CaseOutcome* out;
  };

  CaseOutcome run_case(KernelHandle handle, const CandidateSpec& c, const CaseSpec& cs,
                       unsigned char poison, bool keep_outputs, uint64_t seed,
                       bool ref_stats = false, const Companion* companion = nullptr) {
    size_t cursor = 0;
    SetData d =
        prepare_set(layout(target, cs.shape, cs.dtype, true, &cursor), cs.shape, cs.dist, seed);
    // The reference runs here while the child runs the candidate.
    auto ref = std::async(std::launch::async, [&] { return compute_reference(d, cs.shape); });
    const std::string what = cs.stage + " " + shape_string(cs.shape) + " " +
                             std::string(dtype_name(cs.dtype)) + " " +
                             std::string(distribution_name(cs.dist));
    CaseOutcome launched = launch_case(handle, c, cs, d, poison, what);
    // A reference that failed is the target's fault: said first, whatever the candidate did.
    if (Status st = ref.get(); !st.is_ok())
      return {CaseKind::kInternal, 0, what + ": " + st.message(), {}};
    if (launched.kind != CaseKind::kPass) return launched;
    const unsigned char* arena = sandbox->arena();
    for (size_t i = 0; i < d.slots.size(); ++i) {
      const TensorSlot& s = d.slots[i];
      if (s.arg->role != TargetArg::Role::kInput) continue;
      if (checksum(arena + s.after, s.count * dtype_bytes(s.dtype)) != d.input_checksums[i]) {
        return {CaseKind::kInputMutated,
                0,
                what + ": input '" + s.arg->name + "' was modified by the kernel",
                {}};
      }
    }
    CaseOutcome o = check_outputs(d, cs.dtype, poison, ref_stats);
    if (o.kind != CaseKind::kPass) o.detail = what + ": " + o.detail;
    if (keep_outputs) {
      for (const auto& s : d.slots) {
        if (s.arg->role != TargetArg::Role::kOutput) continue;
        o.outputs.emplace_back(reinterpret_cast<const char*>(arena + s.offset),
                               s.count * dtype_bytes(s.dtype));
      }
    }
    if (companion != nullptr && o.kind == CaseKind::kPass) {
      CaseOutcome& theirs = *companion->out;
      theirs = launch_case(companion->handle, *companion->spec, cs, d, poison, what);
      if (theirs.kind == CaseKind::kPass) theirs = check_outputs(d, cs.dtype, poison, true);
    }
    return o;
  }
};

}  // namespace kiln::eval
