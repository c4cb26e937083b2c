// The precision stage of an evaluation (docs/threats.md row 10): a kernel that computes in a lower
// precision, or with a cruder approximation, can stay inside the tolerance (which must admit
// every honest kernel) while its error is tens of times the honest error. The backend's seed --
// the plain, obviously correct kernel -- runs on the inputs of every sweep case in the timed dtype
// right after the candidate passed it (loaded once per sandbox child, so the comparison costs one
// more launch and one more comparison a case), and the candidate's worst and RMS error may be at
// most precision_factor times the seed's.
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

CandidateSpec CandidateEvaluator::Impl::seed_candidate() const {
  const KernelSpec& seed = target.backend(backend)->seed;
  return candidate_of(seed, "seed", seed.defines);
}

bool CandidateEvaluator::Impl::is_seed(const CandidateSpec& c) const {
  const KernelSpec& seed = target.backend(backend)->seed;
  return c.source == seed.source && c.kernel_name == seed.kernel_name;
}

Result<KernelHandle> CandidateEvaluator::Impl::seed_kernel(DType dtype) {
  KILN_RETURN_IF_ERROR(ensure_sandbox());
  if (auto it = seed_kernels.find(dtype);
      it != seed_kernels.end() && it->second.generation == sandbox_generation) {
    return it->second.handle;
  }
  const CandidateSpec seed = seed_candidate();
  // The seed is trusted text from the target (no scan); its compile is cached like any other.
  KILN_ASSIGN_OR_RETURN(CompileRequest req,
                        build_compile_request(target, backend, sandbox->arch(), seed, dtype));
  const CompileOutput out = compiler->compile(req);
  if (!out.ok) return invalid_argument("the seed does not compile: " + out.log.substr(0, 300));
  KILN_ASSIGN_OR_RETURN(nlohmann::json loaded, load_binary(out, seed.kernel_name));
  if (!loaded.value("ok", false)) {
    return unavailable("the seed does not load: " + loaded.value("error", std::string("?")));
  }
  const auto handle = loaded.value("handle", KernelHandle{0});
  seed_kernels[dtype] = {sandbox_generation, handle};
  return handle;
}

std::optional<proto::Outcome> CandidateEvaluator::Impl::precision_verdict(
    const std::vector<PrecisionSample>& samples, const std::string& not_compared,
    const StageFn& stage, std::string* log) const {
  if (!not_compared.empty()) {
    stage("precision", true, not_compared, 0, 0);
    return std::nullopt;
  }
  double worst_ratio = 0;
  std::string worst_note;
  uint32_t cases = 0;
  for (const PrecisionSample& p : samples) {
    const CaseOutcome& mine = p.mine;
    const CaseOutcome& theirs = p.theirs;
    if (theirs.kind != CaseKind::kPass) continue;  // the seed is no yardstick at this shape
    ++cases;
    const Tolerance tol = tolerance_at(target, p.dtype, p.shape);
    const double tol_floor = kFloorOfTolerance * std::max(tol.abs, 1e-30);
    const double worst_base =
        std::max({theirs.worst_abs, kRoundingUnits * mine.ulp_at_max, tol_floor});
    const double rms_base = std::max({theirs.rms, mine.ulp_at_rms, tol_floor});
    const double worst_limit = precision_factor() * worst_base;
    const double rms_limit = precision_factor() * rms_base;
    const double ratio = std::max(mine.worst_abs / worst_base, mine.rms / rms_base);
    const std::string note = shape_string(p.shape) + " " + std::string(distribution_name(p.dist)) +
                             ": worst error " + fmt_double(mine.worst_abs) + " (seed " +
                             fmt_double(theirs.worst_abs) + "), RMS error " + fmt_double(mine.rms) +
                             " (seed " + fmt_double(theirs.rms) + ")";
    if (ratio > worst_ratio) {
      worst_ratio = ratio;
      worst_note = note;
    }
    if (mine.worst_abs > worst_limit || mine.rms > rms_limit) {
      const std::string detail = "precision below the seed's: " + note + "; at most " +
                                 fmt_double(precision_factor()) + "x the seed's is allowed " +
                                 "(precision_factor in the target spec)";
      stage("precision", false, detail, 0, cases);
      *log = detail;
      return proto::Outcome::kWrongAnswer;
    }
  }
  stage("precision", true,
        cases == 0 ? "not compared: no sweep shape where the seed ran"
                   : "within " + fmt_double(precision_factor()) + "x the seed's error; closest " +
                         fmt_double(worst_ratio) + "x at " + worst_note,
        0, cases);
  return std::nullopt;
}

}  // namespace kiln::eval
