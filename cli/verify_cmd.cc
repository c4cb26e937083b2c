// `kiln verify EXPORT_DIR`: re-runs an export's verification record on this machine -- the five
// stages and the timing of the kernel text and parameters the record names, against the target
// folder the export carries -- and says whether it agrees: every stage passes, and the median is
// within noise of the record's when the GPU is the same model (a different model is reported, not
// judged).
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "cli/export_cmd.h"
#include "cli/local_eval.h"
#include "evaluator/result_json.h"
#include "export/record.h"
#include "shared/fatal.h"

namespace kiln::cli {
namespace {

struct VerifyArgs {
  std::string dir;
  int gpu = 0;
  bool json = false;
};

// The record's timing taken on `device` (its own re-verification, else the run's when the
// search's GPU model is this one), or null.
nlohmann::json comparable_timing(const nlohmann::json& record, const std::string& device) {
  const nlohmann::json here = record.value("verified_here", nlohmann::json::object());
  if (here.is_object() && here.value("device", "") == device && here.contains("timing"))
    return here["timing"];
  const nlohmann::json search = record.value("search", nlohmann::json::object());
  if (search.is_object() && !device.empty() && search.value("gpu_model", "") == device &&
      search.contains("timing")) {
    return search["timing"];
  }
  return nlohmann::json();
}

int run_verify(const VerifyArgs& a) {
  auto fail = [](const std::string& msg, int code) {
    report_fatal("kiln verify: " + msg);
    return code;
  };
  Result<exporter::ExportFolder> folder = exporter::read_export(a.dir);
  if (!folder.is_ok()) return fail(folder.status().message(), 2);
  const exporter::ExportCandidate& c = folder->candidate;
  FILE* progress = a.json ? stderr : stdout;
  std::fprintf(progress, "kiln verify %s: %s (%s, %s) %s %s\n", a.dir.c_str(),
               c.target.name.c_str(), c.backend.c_str(), std::string(dtype_name(c.dtype)).c_str(),
               c.is_template ? "template" : "seed", exporter::params_text(c.params).c_str());
  for (const auto& f : folder->changed_files) {
    std::fprintf(
        progress,
        "  note: %s differs from what kiln exported; this checks the kernel of the record\n",
        f.c_str());
  }
  if (std::string why = backend_unavailable_here(c.backend); !why.empty()) {
    return fail("cannot evaluate " + c.backend + " kernels here: " + why, 2);
  }
  LocalEvalOptions o;
  o.gpu = a.gpu;
  o.progress = [progress](const std::string& line) {
    std::fprintf(progress, "  %s\n", line.c_str());
    std::fflush(progress);
  };
  eval::CandidateSpec spec{"verify", c.source, c.kernel_name, c.params, &c.geometry(), false};
  Result<LocalEval> ev = evaluate_here(c.target, c.backend, spec, c.dtype, o);
  if (!ev.is_ok()) return fail(ev.status().message(), 2);

  const nlohmann::json now = exporter::evaluation_summary(eval::result_to_json(ev->result));
  const bool verified = ev->result.outcome == proto::Outcome::kVerified;
  std::string verdict = verified ? "agrees" : "disagrees";
  std::string timing_note;
  const nlohmann::json then = comparable_timing(folder->record, ev->device);
  const double median = now["timing"].value("median_us", 0.0);
  double ratio = 0, allowed = 0;
  if (verified && then.is_object() && then.value("median_us", 0.0) > 0) {
    // Within noise: the larger of 5% and three times the two sets' relative IQRs together.
    ratio = median / then.value("median_us", 1.0);
    allowed =
        std::max(0.05, 3 * (then.value("noise_rel", 0.0) + now["timing"].value("noise_rel", 0.0)));
    const bool close = std::fabs(ratio - 1) <= allowed;
    char buf[256];
    std::snprintf(buf, sizeof buf,
                  "median %.2f us against the record's %.2f us (%+.1f%%, noise allows %.1f%%)",
                  median, then.value("median_us", 0.0), 100 * (ratio - 1), 100 * allowed);
    timing_note = buf;
    if (!close) verdict = "disagrees";
  } else if (verified) {
    char buf[256];
    std::snprintf(
        buf, sizeof buf,
        "median %.2f us on %s; the record has no timing on this device model to compare with",
        median, ev->device.c_str());
    timing_note = buf;
  }
  if (a.json) {
    nlohmann::json out = {{"verdict", verdict},    {"device", ev->device},
                          {"arch", ev->arch},      {"evaluation", now},
                          {"record_timing", then}, {"ratio", ratio},
                          {"allowed", allowed},    {"changed_files", folder->changed_files},
                          {"tools", ev->tools}};
    std::printf("%s\n", out.dump(2).c_str());
  } else {
    std::printf("result: %s on %s (%s)\n", proto::outcome_name(ev->result.outcome).c_str(),
                ev->device.c_str(), ev->arch.c_str());
    for (const auto& s : ev->result.stages) {
      if (!s.passed) std::printf("  %s FAILED: %s\n", s.name.c_str(), s.detail.c_str());
    }
    if (!timing_note.empty()) std::printf("  timing: %s\n", timing_note.c_str());
    std::printf("verdict: %s with the record\n", verdict.c_str());
  }
  return verdict == "agrees" ? 0 : 1;
}

}  // namespace

void add_verify_command(CLI::App& app, std::function<int()>& action) {
  auto a = std::make_shared<VerifyArgs>();
  CLI::App* sub = app.add_subcommand(
      "verify",
      "Re-run an export's verification record here: the five verification stages and the\n"
      "timing of the kernel the record names (kernel/ and target/ of the export folder), and\n"
      "whether they agree with the record: every stage passes, and the median is within noise\n"
      "of the record's when this GPU is the model it was timed on. Exit code 0 when it agrees,\n"
      "1 when it does not, 2 when it cannot run here.");
  sub->add_option("dir", a->dir, "The export folder (written by kiln export)")->required();
  sub->add_option("--gpu", a->gpu, "GPU ordinal")->capture_default_str();
  sub->add_flag("--json", a->json, "Print the outcome as JSON (progress goes to stderr)");
  sub->callback([&action, a] { action = [a] { return run_verify(*a); }; });
}

}  // namespace kiln::cli
