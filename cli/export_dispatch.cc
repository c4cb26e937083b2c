// The dispatch table export: see export_dispatch.h.
#include "cli/export_dispatch.h"

#include <cstdio>

#include "cli/export_here.h"
#include "cli/local_eval.h"
#include "export/dispatch_export.h"
#include "export/record.h"
#include "shared/fatal.h"

namespace kiln::cli {

int run_dispatch_export(const DispatchExportArgs& a,
                        std::vector<exporter::ExportCandidate> entries) {
  auto fail = [](const std::string& msg, int code) {
    report_fatal("kiln export: " + msg);
    return code;
  };
  exporter::ExportCandidate& first = entries.front();
  const std::string native = first.backend == "cuda" ? "cuda" : "cpp";
  const std::string format = a.format.empty() ? native : a.format;
  if (format != native) {
    return fail("a run that swept shapes of " + first.target.name +
                    " is exported as a dispatch table of C++ launchers (--format " + native +
                    "); the " + format + " format takes one kernel",
                2);
  }
  if (!a.dtype.empty()) {
    Result<DType> d = export_dtype(first, a.dtype);
    if (!d.is_ok()) return fail(d.status().message(), 2);
    for (auto& e : entries) e.dtype = *d;
  }
  Result<std::vector<exporter::ExportFile>> files =
      exporter::dispatch_export(entries, exporter::header_note(first, format));
  if (!files.is_ok()) return fail(files.status().message(), 2);
  const std::string to = a.to.empty() ? first.target.name + "-" + format : a.to;
  if (Status s = exporter::check_export_folder(to); !s.is_ok()) return fail(s.message(), 2);

  std::printf("kiln export: %s (%s, %s) as a dispatch table of %zu configurations:\n",
              first.target.name.c_str(), first.backend.c_str(),
              std::string(dtype_name(first.dtype)).c_str(), entries.size());
  for (size_t k = 0; k < entries.size(); ++k) {
    const auto& e = entries[k];
    std::printf("  v%-3zu %-28s %-24s %10.2f us  %s%s\n", k, shape_string(e.shape).c_str(),
                e.gpu_model.empty() ? "(any GPU)" : e.gpu_model.c_str(), e.best_us,
                e.is_template ? "template " : "seed ", exporter::params_text(e.params).c_str());
  }
  nlohmann::json here;
  const std::string unavailable = backend_unavailable_here(first.backend);
  if (a.no_verify || !unavailable.empty()) {
    const std::string why = a.no_verify ? "--no-verify" : unavailable;
    std::printf("  not verified here (%s); the record keeps the run's verification\n", why.c_str());
    here = {{"skipped", why}};
  } else {
    std::printf(
        "  verifying each here (five stages at every shape the target lists, timed at its own "
        "shape):\n");
    nlohmann::json each = nlohmann::json::array();
    for (size_t k = 0; k < entries.size(); ++k) {
      const auto& e = entries[k];
      Result<HereCheck> check = verify_here(e, a.gpu, e.shape, {});
      if (!check.is_ok())
        return fail("verifying v" + std::to_string(k) + " here: " + check.status().message(), 1);
      if (!check->failure.empty()) {
        return fail("v" + std::to_string(k) + " did not verify here (" + check->failure +
                        "); nothing was written",
                    1);
      }
      std::printf("    v%zu: verified, %.2f us at %s\n", k,
                  check->record["timing"].value("median_us", 0.0), shape_string(e.shape).c_str());
      nlohmann::json s = std::move(check->record);
      s["variant"] = "v" + std::to_string(k);
      each.push_back(std::move(s));
    }
    here = {{"entries", each}};
  }
  if (Status w = exporter::write_export(to, first, format, *files, here, entries); !w.is_ok())
    return fail(w.message(), 1);
  std::printf("wrote %s/:", to.c_str());
  for (const auto& f : *files) std::printf(" %s", f.name.c_str());
  std::printf(" %s kernel/ target/\n", exporter::kRecordFile);
  std::printf("build it: include(%s/%s.cmake); %s::launch(...) picks the entry by shape and GPU\n",
              to.c_str(), first.target.name.c_str(), ("kiln_" + first.target.name).c_str());
  return 0;
}

}  // namespace kiln::cli
