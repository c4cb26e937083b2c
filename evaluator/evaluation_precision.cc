// The precision stage of an evaluation (THREATS.md row 10): a kernel that computes in a lower
// precision, or with a cruder approximation, can stay inside the tolerance (which must admit
// every honest kernel) while its error is tens of times the honest error. The backend's seed --
// the plain, obviously correct kernel -- runs on the same inputs as the candidate at every sweep
// shape, and the candidate's worst and RMS error may be at most precision_factor times the seed's.
// The seed's error is floored at what rounding to the output's dtype allows any honest kernel --
// two units of rounding at the largest output for the worst error, one at the RMS output for the
// RMS error -- and at a small part of the tolerance: at small shapes an f16 seed is often exact
// (its error 0) where an honest kernel that sums in another order is one unit off.
#include <algorithm>

#include "evaluator/evaluation_internal.h"

namespace kiln::eval {
namespace {

// Errors below this part of the tolerance's absolute term are never held against a candidate.
constexpr double kFloorOfTolerance = 0.05;
// Units of rounding at the largest output that the worst error may always reach.
constexpr double kRoundingUnits = 2;

}  // namespace

std::optional<proto::Outcome> CandidateEvaluator::Impl::precision_stage(const CandidateSpec& c,
                                                                        KernelHandle handle,
                                                                        DType dtype,
                                                                        const StageFn& stage,
                                                                        std::string* log) {
  const BackendSpec* b = target.backend(backend);
  const KernelSpec& seed = b->seed;
  if (c.source == seed.source && c.kernel_name == seed.kernel_name) {
    stage("precision", true, "the seed itself", 0, 0);
    return std::nullopt;
  }
  CandidateSpec seed_candidate;
  seed_candidate.label = "seed";
  seed_candidate.source = seed.source;
  seed_candidate.kernel_name = seed.kernel_name;
  seed_candidate.params = seed.defines;
  seed_candidate.geometry = &seed;
  // The seed is trusted text from the target (no scan); its compile is cached like any other.
  Result<CompileRequest> req =
      build_compile_request(target, backend, sandbox->arch(), seed_candidate, dtype);
  CompileOutput out;
  if (req.is_ok()) out = compiler->compile(*req);
  Result<nlohmann::json> loaded =
      req.is_ok() && out.ok ? load_binary(out, seed.kernel_name) : internal_error("not compiled");
  if (!loaded.is_ok() || !loaded->value("ok", false)) {
    // The comparison needs the seed; without it the stage says so and does not judge.
    const std::string why = !req.is_ok() ? req.status().message()
                            : !out.ok    ? "the seed does not compile: " + out.log.substr(0, 300)
                            : loaded.is_ok() ? loaded->value("error", std::string("?"))
                                             : loaded.status().message();
    stage("precision", true, "not compared: " + why, 0, 0);
    return std::nullopt;
  }
  const auto seed_handle = loaded->value("handle", KernelHandle{0});
  auto unload_seed = [&] {
    if (sandbox && sandbox->alive()) {
      sandbox->call({{"op", "unload"}, {"handle", seed_handle}}, options.phase_timeout_ms)
          .status()
          .ignore();
    }
  };
  const Tolerance& tol = target.tolerance.at(dtype);
  const double tol_floor = kFloorOfTolerance * std::max(tol.abs, 1e-30);
  double worst_ratio = 0;
  std::string worst_note;
  uint32_t cases = 0;
  for (const Shape& shape : target.sweep) {
    const CaseSpec cs{"precision", shape, dtype, Distribution::kNormal};
    const uint64_t s = seeds.next();
    CaseOutcome mine = run_case(handle, c, cs, kPoisonA, false, s, /*ref_stats=*/true);
    CaseOutcome theirs = run_case(seed_handle, seed_candidate, cs, kPoisonA, false, s);
    if (mine.kind != CaseKind::kPass) {  // passed the sweep, fails here: report as the sweep would
      unload_seed();
      stage("precision", false, mine.detail, mine.worst_rel, cases + 1);
      *log = mine.detail;
      return mine.kind == CaseKind::kWrong ? proto::Outcome::kWrongAnswer : proto::Outcome::kCrash;
    }
    if (theirs.kind != CaseKind::kPass) continue;  // the seed is no yardstick at this shape
    ++cases;
    const double worst_base =
        std::max({theirs.worst_abs, kRoundingUnits * mine.ulp_at_max, tol_floor});
    const double rms_base = std::max({theirs.rms, mine.ulp_at_rms, tol_floor});
    const double worst_limit = precision_factor() * worst_base;
    const double rms_limit = precision_factor() * rms_base;
    const double ratio = std::max(mine.worst_abs / worst_base, mine.rms / rms_base);
    const std::string note = shape_string(shape) + ": worst error " + fmt_double(mine.worst_abs) +
                             " (seed " + fmt_double(theirs.worst_abs) + "), RMS error " +
                             fmt_double(mine.rms) + " (seed " + fmt_double(theirs.rms) + ")";
    if (ratio > worst_ratio) {
      worst_ratio = ratio;
      worst_note = note;
    }
    if (mine.worst_abs > worst_limit || mine.rms > rms_limit) {
      unload_seed();
      const std::string detail = "precision below the seed's: " + note + "; at most " +
                                 fmt_double(precision_factor()) + "x the seed's is allowed " +
                                 "(precision_factor in the target spec)";
      stage("precision", false, detail, 0, cases);
      *log = detail;
      return proto::Outcome::kWrongAnswer;
    }
  }
  unload_seed();
  stage("precision", true,
        cases == 0 ? "not compared: no sweep shape where the seed ran"
                   : "within " + fmt_double(precision_factor()) + "x the seed's error; closest " +
                         fmt_double(worst_ratio) + "x at " + worst_note,
        0, cases);
  return std::nullopt;
}

}  // namespace kiln::eval
