// The evaluation flow of one candidate: create() builds the sandbox and the reference;
// evaluate() scans, compiles and loads, runs the five verification stages (run_case in
// evaluation_internal.h), then times with the outputs of the timed launches re-checked, and
// applies the physical-floor check.
#include "evaluator/evaluation.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <future>
#include <set>

#include "evaluator/evaluation_internal.h"
#include "evaluator/prelude.h"
#include "evaluator/source_scan.h"
#include "shared/text.h"

namespace kiln::eval {
namespace fs = std::filesystem;

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
  if (!impl.options.benchmark_override && b->benchmark)
    impl.options.benchmark_override = *b->benchmark;
  impl.dtypes = b->dtypes;
  std::error_code ec;
  fs::create_directories(impl.options.cache_dir, ec);
  if (ec) return unavailable("creating cache dir " + impl.options.cache_dir + ": " + ec.message());
  impl.scratch = impl.options.cache_dir + "/binaries";
  fs::create_directories(impl.scratch, ec);
  KILN_ASSIGN_OR_RETURN(impl.reference, Reference::build(impl.target, impl.options.cache_dir));
  impl.reference->set_threads(impl.options.reference_threads > 0 ? impl.options.reference_threads
                                                                 : default_reference_threads());
  for (DType d : b->dtypes) impl.timing_base = std::max(impl.timing_base, impl.verify_bytes(d));
  impl.arena_bytes = impl.needed_arena_bytes();
  if (impl.options.max_arena_bytes == 0) {
    const double half = 0.5 * static_cast<double>(sysconf(_SC_PHYS_PAGES)) *
                        static_cast<double>(sysconf(_SC_PAGE_SIZE));
    impl.options.max_arena_bytes =
        static_cast<size_t>(std::clamp(half, 1.0 * (1 << 30), 32.0 * (size_t{1} << 30)));
  }
  // Said before anything is allocated for shapes too large for this machine, not as a failed
  // allocation halfway through an evaluation.
  if (impl.arena_bytes > impl.options.max_arena_bytes) {
    return invalid_argument(
        "the verification shapes and timing at " + shape_string(impl.benchmark()) + " need " +
        std::to_string(impl.arena_bytes >> 20) + " MiB of arena, more than this evaluator's " +
        "limit of " + std::to_string(impl.options.max_arena_bytes >> 20) +
        " MiB (half this machine's memory): choose a smaller --shape");
  }
  KILN_RETURN_IF_ERROR(impl.ensure_sandbox().with_context("starting the sandbox"));
  e->arch_ = impl.sandbox->arch();
  e->device_name_ = impl.sandbox->device_name();
  return e;
}

CandidateEvaluator::~CandidateEvaluator() = default;

Status CandidateEvaluator::Impl::fit_arena() {
  const size_t needed = needed_arena_bytes();
  if (needed <= arena_bytes) return Status::ok();
  if (needed > options.max_arena_bytes) {
    return invalid_argument(
        "timing at " + shape_string(benchmark()) + " needs " + std::to_string(needed >> 20) +
        " MiB of arena, more than this " + "evaluator's limit of " +
        std::to_string(options.max_arena_bytes >> 20) + " MiB: sweep smaller shapes");
  }
  arena_bytes = needed;
  sandbox.reset();  // the next ensure_sandbox() maps an arena of the new size
  return ensure_sandbox().with_context("starting a sandbox with a larger arena");
}

namespace {

proto::Outcome outcome_of(CaseKind k) {
  switch (k) {
    case CaseKind::kPass:
      return proto::Outcome::kVerified;
    case CaseKind::kWrong:
      return proto::Outcome::kWrongAnswer;
    case CaseKind::kInputMutated:
      return proto::Outcome::kRejected;
    case CaseKind::kOutOfBounds:
      return proto::Outcome::kRejected;
    case CaseKind::kTimeout:
      return proto::Outcome::kTimeout;
    case CaseKind::kCrash:
      return proto::Outcome::kCrash;
    case CaseKind::kInternal:
      return proto::Outcome::kInternalError;
  }
  return proto::Outcome::kInternalError;
}

}  // namespace

namespace {

// The compiles of `c`, one per dtype with the timing dtype first. Callers have scanned the source.
Result<std::vector<std::pair<DType, CompileRequest>>> unscanned_compile_requests(
    const CandidateEvaluator::Impl& m, const std::string& arch, const CandidateSpec& c,
    DType timing_dtype) {
  std::vector<std::pair<DType, CompileRequest>> out;
  std::vector<DType> order = {timing_dtype};
  for (DType d : m.dtypes)
    if (d != timing_dtype) order.push_back(d);
  for (DType d : order) {
    KILN_ASSIGN_OR_RETURN(CompileRequest req,
                          build_compile_request(m.target, m.backend, arch, c, d));
    out.emplace_back(d, std::move(req));
  }
  return out;
}

}  // namespace

Result<CompileRequest> build_compile_request(const TargetSpec& target, const std::string& backend,
                                             const std::string& arch, const CandidateSpec& c,
                                             DType dtype) {
  KILN_ASSIGN_OR_RETURN(std::string macro, dtype_macro(backend, dtype));
  CompileRequest req;
  req.source = with_prelude(backend, c.source);
  req.kernel_name = c.kernel_name;
  req.defines = c.params;
  req.defines["KILN_DTYPE"] = macro;
  req.arch = arch;
  req.signature = signature(target, dtype);
  return req;
}

Result<std::vector<std::pair<DType, CompileRequest>>> CandidateEvaluator::compile_requests(
    const CandidateSpec& c, DType timing_dtype) const {
  // Untrusted text is compiled outside the sandbox, so nothing compiles before the scan passes.
  if (!scan_source(c.source, impl_->backend).empty()) {
    return invalid_argument("the source has static-scan findings; it is not compiled");
  }
  return unscanned_compile_requests(*impl_, arch_, c, timing_dtype);
}

proto::EvaluationResult CandidateEvaluator::evaluate(const CandidateSpec& c, DType timing_dtype,
                                                     const ProgressFn& progress) {
  Impl& m = *impl_;
  const auto start = Clock::now();
  proto::EvaluationResult r;
  r.arch = arch_;
  auto say = [&](const std::string& line) {
    if (progress) progress(line);
  };
  auto finish = [&](proto::Outcome outcome) {
    r.outcome = outcome;
    r.wall_ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
    return r;
  };
  auto stage = [&](std::string name, bool passed, std::string detail, double worst,
                   uint32_t cases) {
    say(name + ": " + (passed ? "passed" : "FAILED") + " (" + std::to_string(cases) + " case" +
        (cases == 1 ? "" : "s") + (worst > 0 ? ", worst rel error " + fmt_double(worst) : "") +
        ")" + (detail.empty() ? "" : " -- " + detail));
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

  // Static scan (docs/threats.md rows 5 and 7): refused before anything compiles the text.
  std::vector<ScanFinding> findings = scan_source(c.source, m.backend);
  if (!findings.empty()) {
    // The first kMaxFindingsShown, each made safe for one line: a binary file gave thousands of
    // findings quoting raw bytes, in one 60 KB line.
    constexpr size_t kMaxFindingsShown = 10;
    std::string detail;
    for (size_t i = 0; i < findings.size() && i < kMaxFindingsShown; ++i) {
      detail += (detail.empty() ? "" : "; ") + log_safe(findings[i].rule, 160) + " at line " +
                std::to_string(findings[i].line);
    }
    if (findings.size() > kMaxFindingsShown)
      detail += "; and " + std::to_string(findings.size() - kMaxFindingsShown) + " more";
    stage("scan", false, detail, 0, 1);
    return finish(proto::Outcome::kRejected);
  }
  stage("scan", true, "", 0, 1);

  // The timing shape: a sweep's (checked against the target's dims, the arena grown to fit it) or
  // the benchmark shape.
  m.timing_shape = c.shape;
  if (c.shape) {
    Status fits = check_shape(m.target, *c.shape);
    if (fits.is_ok()) fits = m.fit_arena();
    if (!fits.is_ok()) {
      r.log = fits.message();
      r.worker_fault = fits.code() != StatusCode::kInvalidArgument;
      return finish(proto::Outcome::kInternalError);
    }
    r.shape = *c.shape;
  }

  // Compile once per dtype the backend's kernels support (the sweep covers them all).
  // The scan above passed, so the requests are built without scanning again.
  Result<std::vector<std::pair<DType, CompileRequest>>> requests =
      unscanned_compile_requests(m, arch_, c, timing_dtype);
  if (!requests.is_ok()) {
    r.log = requests.status().message();
    return finish(proto::Outcome::kInternalError);
  }
  std::map<DType, KernelHandle> handles;
  auto unload_all = [&] {
    if (!m.sandbox || !m.sandbox->alive()) return;
    for (const auto& [d, h] : handles) {
      m.sandbox->call({{"op", "unload"}, {"handle", h}}, m.options.phase_timeout_ms)
          .status()
          .ignore();
    }
  };
  double compile_ms = 0;
  int compiles_run = 0;  // compiles this evaluation ran itself (not cached, not prefetched)
  for (const auto& [d, req] : *requests) {
    CompileOutput out = m.compiler->compile(req);
    compile_ms += out.compile_ms;
    compiles_run += !out.from_cache && !out.shared;
    if (!out.ok) {
      // A refusal names what the scan of the compiler's output found (its first "kiln: scan" line).
      std::string why = std::string(dtype_name(d)) + (out.rejected ? ": refused" : "");
      if (size_t at = out.log.find("kiln: scan"); out.rejected && at != std::string::npos) {
        why += " -- " + out.log.substr(at, out.log.find('\n', at) - at).substr(0, 300);
      }
      stage("compile", false, why, 0, 1);
      r.log = out.log;
      unload_all();
      return finish(out.rejected ? proto::Outcome::kRejected : proto::Outcome::kCompileError);
    }
    if (Status s = m.ensure_sandbox(); !s.is_ok()) {
      r.log = s.message();
      return finish(proto::Outcome::kInternalError);
    }
    Result<nlohmann::json> loaded = m.load_binary(out, c.kernel_name);
    if (!loaded.is_ok() || !loaded->value("ok", false)) {
      std::string why =
          loaded.is_ok() ? loaded->value("error", std::string("?")) : loaded.status().message();
      stage("load", false, why, 0, 1);
      r.log = why;
      return finish(loaded.is_ok() ? proto::Outcome::kCrash
                                   : outcome_of(m.call_failed(loaded.status(), "load").kind));
    }
    handles[d] = loaded->value("handle", KernelHandle{0});
  }
  r.metrics["compile_ms"] = compile_ms;
  r.metrics["compiles_run"] = compiles_run;
  // Where the wall time goes (compile+load, verification, timing), for the evaluation-rate bench.
  auto phase_ms = [&start] {
    return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  };
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
    timing_inputs = std::async(
        std::launch::async, [&m, bench, timing_dtype, seeds, reuse = std::move(reuse)]() mutable {
          size_t cursor = m.timing_base;
          std::vector<Impl::SetData> sets;
          for (size_t s = 0; s < seeds.size(); ++s) {
            Distribution dist = s % 2 ? Distribution::kUniform : Distribution::kNormal;
            sets.push_back(m.prepare_set(layout(m.target, bench, timing_dtype, false, &cursor),
                                         bench, dist, seeds[s], std::move(reuse[s])));
          }
          return sets;
        });
  }

  // The precision stage's comparisons ride on the sweep: the seed runs on the inputs of each
  // sweep case in the timed dtype (evaluation_precision.cc).
  std::vector<Impl::PrecisionSample> precision;
  std::string not_compared;
  std::optional<KernelHandle> seed_handle;
  const CandidateSpec seed_spec = m.seed_candidate();
  if (m.is_seed(c)) {
    not_compared = "the seed itself";
  } else if (Result<KernelHandle> h = m.seed_kernel(timing_dtype); h.is_ok()) {
    seed_handle = *h;
  } else {
    not_compared = "not compared: " + h.status().message();
  }

  // The five verification stages; the first failing stage ends the evaluation.
  for (const char* name : {"smoke", "sweep", "adversarial", "determinism", "edge"}) {
    const double stage_start = phase_ms();
    std::vector<CaseSpec> cases = m.cases_for(name, timing_dtype);
    double worst = 0;
    for (const CaseSpec& cs : cases) {
      const bool determinism = std::string(name) == "determinism";
      uint64_t seed = m.seeds.next();
      const bool compare = seed_handle && cs.stage == "sweep" && cs.dtype == timing_dtype;
      CaseOutcome theirs;
      const Impl::Companion seed_run{seed_handle.value_or(0), &seed_spec, &theirs};
      CaseOutcome o = m.run_case(handles[cs.dtype], c, cs, kPoisonA, determinism, seed, compare,
                                 compare ? &seed_run : nullptr);
      if (compare && o.kind == CaseKind::kPass) {
        precision.push_back({cs.shape, cs.dtype, cs.dist, o, std::move(theirs)});
      }
      if (o.kind == CaseKind::kPass && determinism) {
        // Same inputs, re-poisoned with another pattern: the bits must not change (docs/threats.md
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
    std::string covered =
        "shapes " + join(shapes) + "; dtypes " + join(dtypes_seen) + "; inputs " + join(dists);
    if (auto skip = m.target.adversarial_skip.find(timing_dtype);
        std::string(name) == "adversarial" && skip != m.target.adversarial_skip.end()) {
      std::set<std::string> left_out(skip->second.first.begin(), skip->second.first.end());
      covered += "; left out by the target: " + join(left_out) + " (" + skip->second.second + ")";
    }
    stage(name, true, covered, worst, static_cast<uint32_t>(cases.size()));
    r.metrics[std::string(name) + "_ms"] = phase_ms() - stage_start;
  }
  if (std::optional<proto::Outcome> ended =
          m.precision_verdict(precision, not_compared, stage, &r.log)) {
    unload_all();
    return finish(*ended);
  }
  r.metrics["verified_at_ms"] = phase_ms();
  if (m.options.time) {
    std::optional<proto::Outcome> ended =
        m.time_phase(c, handles[timing_dtype], timing_dtype, timing_inputs.get(), &r, stage, say,
                     static_cast<bool>(progress), phase_ms);
    if (ended) {
      unload_all();
      return finish(*ended);
    }
  }
  unload_all();
  return finish(proto::Outcome::kVerified);
}

}  // namespace kiln::eval