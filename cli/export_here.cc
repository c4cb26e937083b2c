// See export_here.h.
#include "cli/export_here.h"

#include <algorithm>

#include "cli/local_eval.h"
#include "evaluator/result_json.h"
#include "export/record.h"

namespace kiln::cli {

eval::CandidateSpec candidate_spec(const exporter::ExportCandidate& c, const std::string& label) {
  eval::CandidateSpec spec;
  spec.label = label;
  spec.source = c.source;
  spec.kernel_name = c.kernel_name;
  spec.params = c.params;
  spec.geometry = &c.geometry();
  return spec;
}

Result<DType> export_dtype(const exporter::ExportCandidate& c, const std::string& text) {
  KILN_ASSIGN_OR_RETURN(DType d, parse_dtype(text));
  const auto& dts = c.target.backend(c.backend)->dtypes;
  if (std::find(dts.begin(), dts.end(), d) == dts.end()) {
    return invalid_argument("the " + c.backend + " kernels of " + c.target.name +
                            " do not support " + text);
  }
  return d;
}

Result<HereCheck> verify_here(const exporter::ExportCandidate& c, int gpu,
                              std::optional<Shape> shape, const eval::ProgressFn& progress) {
  LocalEvalOptions o;
  o.gpu = gpu;
  o.benchmark_override = std::move(shape);
  o.progress = progress;
  KILN_ASSIGN_OR_RETURN(
      LocalEval ev, evaluate_here(c.target, c.backend, candidate_spec(c, "export"), c.dtype, o));
  HereCheck check;
  if (ev.result.outcome != proto::Outcome::kVerified) {
    check.failure = proto::outcome_name(ev.result.outcome);
    for (const auto& s : ev.result.stages)
      if (!s.passed) check.failure += "; " + s.name + ": " + s.detail;
    return check;
  }
  check.record = exporter::evaluation_summary(eval::result_to_json(ev.result));
  check.record["device"] = ev.device;
  check.record["arch"] = ev.arch;
  check.record["tools"] = ev.tools;
  return check;
}

}  // namespace kiln::cli
