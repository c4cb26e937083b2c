// The export folder and its record: see record.h.
#include "export/record.h"

#include <algorithm>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "shared/bounded_file.h"
#include "shared/build_info.h"
#include "shared/hash.h"
#include "shared/json_fields.h"
#include "shared/text.h"

namespace kiln::exporter {
namespace fs = std::filesystem;
namespace {

// The most kiln reads of one file of an export (its sources and record are far smaller).
constexpr uintmax_t kMaxExportFileBytes = uintmax_t{64} << 20;

// A regular file of the export, not a link, device or fifo (a record may be edited to name
// /dev/zero), and not over kMaxExportFileBytes.
Result<std::string> read_all(const fs::path& p) {
  return read_bounded_file(p.string(), {kMaxExportFileBytes, "a file of an export",
                                        /*streams=*/false, /*follow_links=*/false});
}

Status write_text(const fs::path& p, const std::string& text) {
  std::error_code ec;
  fs::create_directories(p.parent_path(), ec);
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) return unavailable("cannot write " + p.string());
  return Status::ok();
}

// kernel/<name>.<ext>, or kernel/<variant>/<name>.<ext> for an entry of a dispatch table.
std::string kernel_file(const ExportCandidate& c, const std::string& variant = "") {
  return "kernel/" + (variant.empty() ? "" : variant + "/") + c.kernel_name +
         (c.backend == "cuda" ? ".cu" : ".cpp");
}

// What the record says of one kernel (the export's, or one entry's of a dispatch table): enough to
// evaluate it again and to compare with how it was timed.
nlohmann::json kernel_record(const ExportCandidate& c, const std::string& file) {
  return {
      {"candidate_id", c.candidate_id},
      {"kernel",
       {{"from", c.is_template ? "template" : "seed"}, {"name", c.kernel_name}, {"file", file}}},
      {"source_sha256", sha256_hex(c.source)},
      {"params", c.params},
      {"gpu_model", c.gpu_model},
      {"arch", c.arch},
      {"search", evaluation_summary(c.search_result)}};
}

// Reads back what kernel_record wrote into `c` (whose target and backend are set), checking the
// kernel text against its hash. `where` names the record or the entry in messages.
Status read_kernel(const fs::path& root, const nlohmann::json& r, const std::string& where,
                   ExportCandidate& c) {
  const nlohmann::json k = r.value("kernel", nlohmann::json::object());
  if (!k.is_object()) return invalid_argument(where + ": \"kernel\" is not an object");
  c.is_template = k.value("from", "") == "template";
  if (c.is_template && !c.target.backend(c.backend)->tunable)
    return invalid_argument(where + " names a template the target lacks");
  c.kernel_name = k.value("name", "");
  const std::string file = k.value("file", "");
  // Only files of the export folder: a record that names another is not kiln's.
  if (file.rfind("kernel/", 0) != 0 || file.find("..") != std::string::npos)
    return invalid_argument(where + " names a kernel file outside kernel/: '" + file + "'");
  KILN_ASSIGN_OR_RETURN(c.source, read_all(root / file));
  if (sha256_hex(c.source) != r.value("source_sha256", "")) {
    return failed_precondition((root / file).string() +
                               " is not the kernel text kiln exported (its sha256 differs from "
                               "the record's)");
  }
  c.params.clear();
  const nlohmann::json params = r.value("params", nlohmann::json::object());
  for (const auto& [key, v] : params.items()) {
    if (v.is_string()) c.params[key] = v.get<std::string>();
  }
  c.candidate_id = r.value("candidate_id", "");
  c.gpu_model = r.value("gpu_model", "");
  c.arch = r.value("arch", "");
  // The template's own text: its parameters must be a configuration of its space (values outside
  // it were compiled and run, and crashed the sandbox, instead of being refused).
  const KernelSpec* tmpl =
      c.target.backend(c.backend)->tunable ? &*c.target.backend(c.backend)->tunable : nullptr;
  if (c.is_template && tmpl && c.source == tmpl->source) {
    for (const auto& [name, values] : tmpl->space) {
      const auto given = c.params.find(name);
      const bool listed =
          given != c.params.end() && std::any_of(values.begin(), values.end(), [&](int64_t v) {
            return std::to_string(v) == given->second;
          });
      if (!listed) {
        std::string allowed;
        for (int64_t v : values) allowed += (allowed.empty() ? "" : ", ") + std::to_string(v);
        return invalid_argument(where +
                                ": params are not a configuration of the template: " + name + "=" +
                                (given == c.params.end() ? "(none)" : log_safe(given->second, 40)) +
                                " (it takes " + allowed + ")");
      }
    }
  }
  return Status::ok();
}

std::string utc_now() {
  std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

}  // namespace

nlohmann::json evaluation_summary(const nlohmann::json& r) {
  if (!r.is_object()) return nlohmann::json();
  nlohmann::json out = {{"outcome", r.value("outcome", "")},
                        {"evaluator", r.value("evaluator", "")},
                        {"gpu_model", r.value("evaluator_gpu_model", "")},
                        {"arch", r.value("arch", "")}};
  nlohmann::json stages = nlohmann::json::array();
  for (const auto& s : r.value("stages", nlohmann::json::array())) {
    stages.push_back({{"name", s.value("name", "")},
                      {"passed", s.value("passed", false)},
                      {"cases", s.value("cases", 0)},
                      {"worst_rel_error", s.value("worst_rel_error", 0.0)},
                      {"detail", s.value("detail", "")}});
  }
  out["stages"] = stages;
  const nlohmann::json t = r.value("timing", nlohmann::json::object());
  out["timing"] = {{"median_us", t.value("median_us", 0.0)},
                   {"iqr_us", t.value("iqr_us", 0.0)},
                   {"min_us", t.value("min_us", 0.0)},
                   {"noise_rel", t.value("noise_rel", 0.0)},
                   {"samples", t.value("samples", 0)},
                   {"sm_clock_mhz", t.value("sm_clock_mhz", 0.0)},
                   {"throttled_samples", t.value("throttled_samples", 0)}};
  const nlohmann::json m = r.value("metrics", nlohmann::json::object());
  if (m.contains("fraction_of_floor")) out["fraction_of_floor"] = m["fraction_of_floor"];
  if (m.contains("floor_us")) out["floor_us"] = m["floor_us"];
  return out;
}

std::string header_note(const ExportCandidate& c, const std::string& format) {
  std::string n = "// kiln export (" + format + ") of " + c.target.name + ", " +
                  std::string(dtype_name(c.dtype)) + ", " + c.backend +
                  (c.arch.empty() ? "" : " " + c.arch) + ".\n";
  n += "// Kernel: " + std::string(c.is_template ? "template " : "seed ") + c.kernel_name +
       (c.params.empty() ? "" : " with " + params_text(c.params)) + "\n";
  if (!c.candidate_id.empty()) n += "// Candidate " + c.candidate_id + "\n";
  if (!c.gpu_model.empty()) n += "// Searched on " + c.gpu_model + "\n";
  n += "// Written by kiln " KILN_VERSION " (" KILN_GIT_COMMIT
       "). The verification record is kiln-export.json;\n"
       "// `kiln verify <this folder>` re-runs the five verification stages and the timing here.\n";
  return n;
}

Status check_export_folder(const std::string& dir) {
  std::error_code ec;
  if (!fs::exists(dir, ec)) return Status::ok();
  if (!fs::is_directory(dir, ec))
    return failed_precondition(dir + " exists and is not a folder: choose another --to");
  if (fs::exists(fs::path(dir) / kRecordFile, ec) ||
      fs::directory_iterator(dir, ec) == fs::directory_iterator()) {
    return Status::ok();
  }
  return failed_precondition(
      dir +
      " holds other files and no kiln export; kiln writes only into a new or empty "
      "folder or over an export of its own: choose another --to");
}

Status write_export(const std::string& dir, const ExportCandidate& c, const std::string& format,
                    const std::vector<ExportFile>& files, const nlohmann::json& verified_here,
                    const std::vector<ExportCandidate>& entries) {
  KILN_RETURN_IF_ERROR(check_export_folder(dir));
  const fs::path root(dir);
  std::error_code ec;
  // An earlier export here: its files go, so a folder never mixes two exports.
  if (fs::exists(root / kRecordFile, ec)) {
    // Read as every file of an export is (a record replaced by a link to /dev/zero is refused).
    const Result<std::string> text = read_all(root / kRecordFile);
    const nlohmann::json old =
        text.is_ok() ? nlohmann::json::parse(*text, nullptr, false) : nlohmann::json();
    if (old.is_object() && old.contains("files") && old["files"].is_object()) {
      for (const auto& [name, hash] : old["files"].items()) {
        if (!name.empty() && name.find("..") == std::string::npos && name.front() != '/')
          fs::remove(root / name, ec);
      }
    }
    fs::remove_all(root / "kernel", ec);
    fs::remove_all(root / "target", ec);
    fs::remove(root / kRecordFile, ec);
  }
  fs::create_directories(root, ec);
  if (ec) return unavailable("creating " + dir + ": " + ec.message());
  nlohmann::json listed = nlohmann::json::object();
  for (const auto& f : files) {
    KILN_RETURN_IF_ERROR(write_text(root / f.name, f.text));
    listed[f.name] = sha256_hex(f.text);
  }
  KILN_RETURN_IF_ERROR(write_text(root / kernel_file(c), c.source));
  // The target's folder as it was loaded (its spec hash is checked on verify).
  fs::copy(c.target.dir, root / "target", fs::copy_options::recursive, ec);
  if (ec) return unavailable("copying the target folder " + c.target.dir + ": " + ec.message());
  nlohmann::json record = {{"kiln_export", 1},        {"format", format},
                           {"target", c.target.name}, {"spec_hash", c.target.spec_hash},
                           {"backend", c.backend},    {"dtype", std::string(dtype_name(c.dtype))}};
  record.update(kernel_record(c, kernel_file(c)));
  record["origin"] = c.origin;
  record["verified_here"] = verified_here;
  if (!entries.empty()) {
    // A dispatch table: each entry's kernel text and record, so that kiln verify re-checks every
    // one at its own shape. The record's own kernel stays the first entry's.
    const nlohmann::json each = verified_here.value("entries", nlohmann::json::array());
    nlohmann::json table = nlohmann::json::array();
    for (size_t k = 0; k < entries.size(); ++k) {
      const ExportCandidate& e = entries[k];
      const std::string variant = "v" + std::to_string(k);
      KILN_RETURN_IF_ERROR(write_text(root / kernel_file(e, variant), e.source));
      nlohmann::json entry = kernel_record(e, kernel_file(e, variant));
      entry["variant"] = variant;
      entry["shape"] = e.shape;
      entry["best_us"] = e.best_us;
      // Its own verification here, or the table's {"skipped": why}.
      entry["verified_here"] = k < each.size()                     ? each[k]
                               : verified_here.contains("skipped") ? verified_here
                                                                   : nlohmann::json();
      table.push_back(std::move(entry));
    }
    record["entries"] = std::move(table);
  }
  record["exported"] = {
      {"kiln_version", KILN_VERSION}, {"kiln_commit", KILN_GIT_COMMIT}, {"at", utc_now()}};
  record["files"] = listed;
  return write_text(root / kRecordFile, record.dump(2) + "\n");
}

namespace {

Result<ExportFolder> read_export_fields(const std::string& dir) {
  const fs::path root(dir);
  KILN_ASSIGN_OR_RETURN(std::string text, read_all(root / kRecordFile));
  ExportFolder out;
  out.record = nlohmann::json::parse(text, nullptr, false);
  if (out.record.is_discarded() || !out.record.is_object() || !out.record.contains("kiln_export")) {
    return invalid_argument((root / kRecordFile).string() + " is not a kiln export record");
  }
  const nlohmann::json& r = out.record;
  ExportCandidate& c = out.candidate;
  KILN_ASSIGN_OR_RETURN(c.target, load_target((root / "target").string()));
  if (c.target.spec_hash != r.value("spec_hash", "")) {
    return failed_precondition(
        "the target in " + (root / "target").string() +
        " is not the one exported (its spec hash differs from the record's)");
  }
  c.backend = r.value("backend", "");
  if (!c.target.backend(c.backend))
    return invalid_argument("the record names a backend the target lacks: " + c.backend);
  KILN_RETURN_IF_ERROR(read_kernel(root, r, (root / kRecordFile).string(), c));
  KILN_ASSIGN_OR_RETURN(c.dtype, parse_dtype(r.value("dtype", "")));
  {
    const std::vector<DType>& dtypes = c.target.backend(c.backend)->dtypes;
    if (std::find(dtypes.begin(), dtypes.end(), c.dtype) == dtypes.end()) {
      return invalid_argument((root / kRecordFile).string() + ": dtype " +
                              std::string(dtype_name(c.dtype)) + " is not one the " + c.backend +
                              " kernels of " + c.target.name + " take");
    }
  }
  const nlohmann::json entries = r.value("entries", nlohmann::json());
  if (!entries.is_null() && !entries.is_array())
    return invalid_argument((root / kRecordFile).string() + ": \"entries\" is not a list");
  if (entries.is_null() && r.value("verified_here", nlohmann::json::object()).contains("entries")) {
    return failed_precondition(
        "this dispatch table was exported by an earlier kiln whose record lists no entries to "
        "re-check; export it again (kiln export TARGET --out RUN) to verify it");
  }
  for (size_t k = 0; entries.is_array() && k < entries.size(); ++k) {
    const std::string where = (root / kRecordFile).string() + " entry " + std::to_string(k);
    if (!entries[k].is_object()) return invalid_argument(where + " is not an object");
    ExportCandidate e = c;
    KILN_RETURN_IF_ERROR(read_kernel(root, entries[k], where, e));
    KILN_ASSIGN_OR_RETURN(e.shape, shape_from_json(entries[k].value("shape", nlohmann::json()),
                                                   where + " shape", c.target.dims));
    e.variant = entries[k].value("variant", "v" + std::to_string(k));
    const nlohmann::json best = entries[k].value("best_us", nlohmann::json());
    e.best_us = best.is_number() ? best.get<double>() : 0;
    e.origin = dir;
    out.entries.push_back(std::move(e));
  }
  c.origin = dir;
  const nlohmann::json files = r.value("files", nlohmann::json::object());
  for (const auto& [name, hash] : files.items()) {
    const fs::path rel(name);
    if (name.empty() || rel.is_absolute() ||
        std::any_of(rel.begin(), rel.end(), [](const fs::path& part) { return part == ".."; })) {
      return invalid_argument((root / kRecordFile).string() +
                              " lists a file outside the export: '" + log_safe(name, 100) + "'");
    }
    Result<std::string> now = read_all(root / name);
    if (!now.is_ok() || !hash.is_string() || sha256_hex(*now) != hash.get<std::string>())
      out.changed_files.push_back(name);
  }
  return out;
}

}  // namespace

Result<ExportFolder> read_export(const std::string& dir) {
  return read_json_guarded((fs::path(dir) / kRecordFile).string(),
                           [&] { return read_export_fields(dir); });
}

}  // namespace kiln::exporter
