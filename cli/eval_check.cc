// `kiln eval --check`: scan, geometry and compiles of one candidate, nothing run.
#include "cli/eval_check.h"

#include <cstdint>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli/sweep.h"
#include "evaluator/source_scan.h"
#include "shared/text.h"

namespace kiln::cli {
namespace {

// The launch limits of every CUDA device kiln targets (as `kiln targets --check` checks them).
constexpr uint64_t kMaxThreadsPerBlock = 1024;
constexpr uint64_t kMaxSharedBytes = 227 * 1024;

std::string indented(const std::string& text, const std::string& pad) {
  std::string out = pad;
  for (size_t i = 0; i < text.size(); ++i) {
    out += text[i];
    if (text[i] == '\n' && i + 1 < text.size()) out += pad;
  }
  if (!out.empty() && out.back() != '\n') out += '\n';
  return out;
}

// Why the geometry cannot launch ("" when it can).
std::string geometry_problem(const nlohmann::json& g, const std::string& backend) {
  if (g.contains("error")) return g["error"].get<std::string>();
  if (backend == "cpu") return "";  // cuda and triton launch on a GPU
  uint64_t threads = 1;
  for (const auto& v : g["block"]) threads *= v.get<uint64_t>();
  for (const auto& v : g["grid"]) {
    if (v.get<uint64_t>() == 0) return "an empty grid";
  }
  if (threads == 0 || threads > kMaxThreadsPerBlock)
    return std::to_string(threads) + " threads per block";
  if (g["shared_bytes"].get<uint64_t>() > kMaxSharedBytes) {
    return std::to_string(g["shared_bytes"].get<uint64_t>()) + " bytes of shared memory (at most " +
           std::to_string(kMaxSharedBytes) + ")";
  }
  return "";
}

std::string triple(const nlohmann::json& v) {
  return "[" + std::to_string(v[0].get<uint64_t>()) + "," + std::to_string(v[1].get<uint64_t>()) +
         "," + std::to_string(v[2].get<uint64_t>()) + "]";
}

}  // namespace

int run_eval_check(const CheckArgs& a, eval::Compiler& compiler) {
  const eval::CandidateSpec& c = a.choice->candidate;
  const std::string param_text = format_params(c.params);
  nlohmann::json report = {{"target", a.target->name}, {"backend", a.backend},
                           {"arch", a.arch},           {"label", c.label},
                           {"kernel", c.kernel_name},  {"params", c.params}};
  FILE* out = a.json ? stderr : stdout;
  std::fprintf(
      out,
      "kiln eval %s --check: backend %s (compiling for %s), kernel %s%s%s with the %s's geometry; "
      "nothing runs\n",
      a.target->name.c_str(), a.backend.c_str(), a.arch.c_str(), c.label.c_str(),
      param_text.empty() ? "" : " ", param_text.c_str(), a.choice->geometry.c_str());
  bool ok = true;

  nlohmann::json g = geometry_json(*a.choice, a.shape, a.dtype);
  report["geometry"] = g;
  const std::string problem = geometry_problem(g, a.backend);
  if (!problem.empty()) {
    ok = false;
    std::fprintf(out, "  geometry at %s: FAILED -- %s\n", shape_string(a.shape).c_str(),
                 problem.c_str());
  } else if (a.backend != "cpu") {
    std::fprintf(out,
                 "  geometry at %s (%s): grid %s, block %s, %llu bytes of dynamic shared memory\n",
                 shape_string(a.shape).c_str(), std::string(dtype_name(a.dtype)).c_str(),
                 triple(g["grid"]).c_str(), triple(g["block"]).c_str(),
                 static_cast<unsigned long long>(g["shared_bytes"].get<uint64_t>()));
  }

  // Untrusted text is compiled outside any sandbox here, so nothing compiles before the scan
  // passes (as in an evaluation).
  const std::vector<eval::ScanFinding> findings = eval::scan_source(c.source, a.backend);
  report["scan"] = nlohmann::json::array();
  for (const auto& f : findings)
    report["scan"].push_back({{"rule", f.rule}, {"line", f.line}, {"excerpt", f.excerpt}});
  report["compiles"] = nlohmann::json::array();
  if (!findings.empty()) {
    ok = false;
    std::fprintf(out, "  scan: FAILED (%zu finding%s; nothing is compiled)\n", findings.size(),
                 findings.size() == 1 ? "" : "s");
    for (const auto& f : findings) {
      std::fprintf(out, "    line %d: %s -- %s\n", f.line, terminal_safe(f.rule).c_str(),
                   terminal_safe(f.excerpt).c_str());
    }
  } else {
    std::fprintf(out, "  scan: passed\n");
    for (DType d : a.backend_spec->dtypes) {
      const std::string dn(dtype_name(d));
      Result<eval::CompileRequest> req =
          eval::build_compile_request(*a.target, a.backend, a.arch, c, d);
      if (!req.is_ok()) {
        ok = false;
        std::fprintf(out, "  compile %s: FAILED -- %s\n", dn.c_str(),
                     req.status().message().c_str());
        report["compiles"].push_back(
            {{"dtype", dn}, {"ok", false}, {"log", req.status().message()}});
        continue;
      }
      eval::CompileOutput o = compiler.compile(*req);
      report["compiles"].push_back({{"dtype", dn},
                                    {"ok", o.ok},
                                    {"log", o.log},
                                    {"compile_ms", o.compile_ms},
                                    {"from_cache", o.from_cache}});
      if (o.ok) {
        if (o.from_cache) {
          std::fprintf(out, "  compile %s: ok (cached)\n", dn.c_str());
        } else {
          std::fprintf(out, "  compile %s: ok (%.2f s)\n", dn.c_str(), o.compile_ms / 1000);
        }
      } else {
        ok = false;
        std::fprintf(out, "  compile %s: FAILED%s\n", dn.c_str(), o.rejected ? " (refused)" : "");
      }
      if (!o.log.empty() && o.log.find_first_not_of(" \n\t") != std::string::npos) {
        std::fprintf(out, "%s", terminal_safe(indented(o.log, "    ")).c_str());
      }
    }
  }
  report["ok"] = ok;
  if (a.json) {
    std::printf("%s\n", report.dump(2).c_str());
  } else if (ok) {
    std::printf(
        "check: passed (scan clean, %zu dtype%s compiled; nothing was run: `kiln eval` without "
        "--check "
        "verifies and times it)\n",
        a.backend_spec->dtypes.size(), a.backend_spec->dtypes.size() == 1 ? "" : "s");
  } else {
    std::printf("check: FAILED\n");
  }
  return ok ? 0 : 1;
}

}  // namespace kiln::cli
