// `kiln verify EXPORT_DIR`: re-runs an export's verification record on this machine -- the five
// stages and the timing of the kernel text and parameters the record names, against the target
// folder the export carries -- and says whether it agrees: every stage passes, and the median is
// within noise of the record's when the GPU is the same model (a different model is reported, not
// judged). A dispatch table's every entry is checked so, each timed at the shape it won.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>

#include "cli/export_cmd.h"
#include "cli/export_here.h"
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

// One kernel checked again: the evaluation here and how its timing compares with the record's.
struct Check {
  std::string verdict;  // "agrees" or "disagrees"
  std::string timing_note;
  nlohmann::json evaluation, record_timing;
  double ratio = 0, allowed = 0;
  LocalEval ev;
};

// Evaluates `c` here (timed at `shape` when given) and compares it with `record` (the export's
// record, or one entry's of a dispatch table).
Result<Check> check_here(const exporter::ExportCandidate& c, const nlohmann::json& record,
                         std::optional<Shape> shape, const VerifyArgs& a, FILE* progress) {
  LocalEvalOptions o;
  o.gpu = a.gpu;
  o.benchmark_override = std::move(shape);
  o.progress = [progress](const std::string& line) {
    std::fprintf(progress, "  %s\n", line.c_str());
    std::fflush(progress);
  };
  Check out;
  KILN_ASSIGN_OR_RETURN(
      out.ev, evaluate_here(c.target, c.backend, candidate_spec(c, "verify"), c.dtype, o));
  out.evaluation = exporter::evaluation_summary(eval::result_to_json(out.ev.result));
  const bool verified = out.ev.result.outcome == proto::Outcome::kVerified;
  out.verdict = verified ? "agrees" : "disagrees";
  out.record_timing = comparable_timing(record, out.ev.device);
  const nlohmann::json& then = out.record_timing;
  const double median = out.evaluation["timing"].value("median_us", 0.0);
  char buf[256];
  if (verified && then.is_object() && then.value("median_us", 0.0) > 0) {
    // Within noise: the larger of 5% and three times the two sets' relative IQRs together.
    out.ratio = median / then.value("median_us", 1.0);
    out.allowed = std::max(0.05, 3 * (then.value("noise_rel", 0.0) +
                                      out.evaluation["timing"].value("noise_rel", 0.0)));
    std::snprintf(buf, sizeof buf,
                  "median %.2f us against the record's %.2f us (%+.1f%%, noise allows %.1f%%)",
                  median, then.value("median_us", 0.0), 100 * (out.ratio - 1), 100 * out.allowed);
    out.timing_note = buf;
    if (std::fabs(out.ratio - 1) > out.allowed) out.verdict = "disagrees";
  } else if (verified) {
    std::snprintf(
        buf, sizeof buf,
        "median %.2f us on %s; the record has no timing on this device model to compare with",
        median, out.ev.device.c_str());
    out.timing_note = buf;
  }
  return out;
}

void print_check(const Check& c, const std::string& indent) {
  std::printf("%sresult: %s on %s (%s)\n", indent.c_str(),
              proto::outcome_name(c.ev.result.outcome).c_str(), c.ev.device.c_str(),
              c.ev.arch.c_str());
  for (const auto& s : c.ev.result.stages) {
    if (!s.passed)
      std::printf("%s  %s FAILED: %s\n", indent.c_str(), s.name.c_str(), s.detail.c_str());
  }
  if (!c.timing_note.empty())
    std::printf("%s  timing: %s\n", indent.c_str(), c.timing_note.c_str());
}

nlohmann::json check_json(const Check& c) {
  return {{"verdict", c.verdict},
          {"evaluation", c.evaluation},
          {"record_timing", c.record_timing},
          {"ratio", c.ratio},
          {"allowed", c.allowed}};
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
  const std::string what =
      c.target.name + " (" + c.backend + ", " + std::string(dtype_name(c.dtype)) + ")";
  if (folder->entries.empty()) {
    std::fprintf(progress, "kiln verify %s: %s %s %s\n", a.dir.c_str(), what.c_str(),
                 c.is_template ? "template" : "seed", exporter::params_text(c.params).c_str());
  } else {
    std::fprintf(progress,
                 "kiln verify %s: %s, a dispatch table of %zu entries, each at its own shape\n",
                 a.dir.c_str(), what.c_str(), folder->entries.size());
  }
  for (const auto& f : folder->changed_files) {
    std::fprintf(progress,
                 "  note: %s differs from what kiln exported; this checks the kernels of the "
                 "record\n",
                 f.c_str());
  }
  if (std::string why = backend_unavailable_here(c.backend); !why.empty()) {
    return fail("cannot evaluate " + c.backend + " kernels here: " + why, 2);
  }

  if (folder->entries.empty()) {
    Result<Check> check = check_here(c, folder->record, std::nullopt, a, progress);
    if (!check.is_ok()) return fail(check.status().message(), 2);
    if (a.json) {
      nlohmann::json out = check_json(*check);
      out["device"] = check->ev.device;
      out["arch"] = check->ev.arch;
      out["changed_files"] = folder->changed_files;
      out["tools"] = check->ev.tools;
      std::printf("%s\n", out.dump(2).c_str());
    } else {
      print_check(*check, "");
      std::printf("verdict: %s with the record\n", check->verdict.c_str());
    }
    return check->verdict == "agrees" ? 0 : 1;
  }

  // A dispatch table: every entry, each timed at the shape it won, against its own record.
  const nlohmann::json records = folder->record.value("entries", nlohmann::json::array());
  nlohmann::json each = nlohmann::json::array();
  size_t agreeing = 0;
  std::string device, arch;
  nlohmann::json tools;
  for (size_t k = 0; k < folder->entries.size(); ++k) {
    const exporter::ExportCandidate& e = folder->entries[k];
    std::fprintf(progress, "%s %s on %s: %s %s\n", e.variant.c_str(), shape_string(e.shape).c_str(),
                 e.gpu_model.empty() ? "any GPU" : e.gpu_model.c_str(),
                 e.is_template ? "template" : "seed", exporter::params_text(e.params).c_str());
    std::fflush(progress);
    Result<Check> check = check_here(e, records.at(k), e.shape, a, progress);
    if (!check.is_ok()) return fail(e.variant + ": " + check.status().message(), 2);
    device = check->ev.device;
    arch = check->ev.arch;
    tools = check->ev.tools;
    agreeing += check->verdict == "agrees";
    if (!a.json) {
      print_check(*check, "  ");
      std::printf("  %s: %s with the record\n", e.variant.c_str(), check->verdict.c_str());
      std::fflush(stdout);
    }
    nlohmann::json j = check_json(*check);
    j["variant"] = e.variant;
    j["shape"] = e.shape;
    j["gpu_model"] = e.gpu_model;
    each.push_back(std::move(j));
  }
  const bool all = agreeing == folder->entries.size();
  const std::string verdict = all ? "agrees" : "disagrees";
  if (a.json) {
    nlohmann::json out = {{"verdict", verdict},
                          {"device", device},
                          {"arch", arch},
                          {"entries", each},
                          {"changed_files", folder->changed_files},
                          {"tools", tools}};
    std::printf("%s\n", out.dump(2).c_str());
  } else {
    std::printf("verdict: %s with the record (%zu of %zu entries agree)\n", verdict.c_str(),
                agreeing, folder->entries.size());
  }
  return all ? 0 : 1;
}

}  // namespace

void add_verify_command(CLI::App& app, std::function<int()>& action) {
  auto a = std::make_shared<VerifyArgs>();
  CLI::App* sub = app.add_subcommand(
      "verify",
      "Re-run an export's verification record here: the five verification stages and the\n"
      "timing of the kernel the record names (kernel/ and target/ of the export folder), and\n"
      "whether they agree with the record: every stage passes, and the median is within noise\n"
      "of the record's when this GPU is the model it was timed on. A dispatch table (the export\n"
      "of a shape sweep) has every entry checked, each timed at its own shape; it agrees when\n"
      "every entry does. Exit code 0 when it agrees,\n"
      "1 when it does not, 2 when it cannot run here.");
  sub->add_option("dir", a->dir, "The export folder (written by kiln export)")->required();
  sub->add_option("--gpu", a->gpu, "GPU ordinal")->capture_default_str();
  sub->add_flag("--json", a->json, "Print the outcome as JSON (progress goes to stderr)");
  sub->callback([&action, a] { action = [a] { return run_verify(*a); }; });
}

}  // namespace kiln::cli
