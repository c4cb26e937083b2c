// See status_table.h.
#include "cli/status_table.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <set>

#include "cli/resume_command.h"
#include "shared/text.h"

namespace kiln::cli {
namespace {

std::string fmt_us(double us) {
  char b[32];
  std::snprintf(b, sizeof(b), us <= 0 ? "-" : "%.2f", us);
  return b;
}

std::string num(double v) {
  char b[40];
  std::snprintf(b, sizeof(b), "%.17g", v);
  return b;
}

// "NVIDIA H100 80GB HBM3" -> "H100": enough to tell the models of one farm apart in a table.
std::string short_model(const std::string& model) {
  std::string m = model.rfind("NVIDIA ", 0) == 0 ? model.substr(7) : model;
  const size_t space = m.find(' ');
  return space == std::string::npos ? m : m.substr(0, space);
}

// "87%", or "<1%" for a figure that would round to 0 (the cpu backend's floor is a sanity bound
// far below any real kernel: docs/evaluator.md); "-" without one.
std::string floor_percent(double fraction) {
  if (!(fraction > 0)) return "-";
  if (fraction < 0.005) return "<1%";
  char b[16];
  std::snprintf(b, sizeof(b), "%.0f%%", 100 * fraction);
  return b;
}

}  // namespace

std::string table_label(const coordinator::TargetReport& r) {
  const std::string unit = r.shape.empty() ? r.target : r.target + "-" + r.shape;
  return r.gpu_model.empty() ? unit : unit + "@" + short_model(r.gpu_model);
}

void print_status_table(const std::vector<coordinator::TargetReport>& reports, FILE* to) {
  int width = 18;
  for (const auto& r : reports) width = std::max(width, static_cast<int>(table_label(r).size()));
  std::fprintf(to, "%-*s %6s %6s %6s %12s %12s %8s %7s  %s\n", width, "target", "evals", "fails", "kept",
               "seed us", "best us", "speedup", "floor", "state");
  for (const auto& r : reports) {
    char speed[16] = "-";
    if (r.seed_us > 0 && r.best_us > 0) std::snprintf(speed, sizeof(speed), "%.2fx", r.seed_us / r.best_us);
    const std::string floor = floor_percent(r.fraction_of_floor);
    std::fprintf(to, "%-*s %6llu %6llu %6llu %12s %12s %8s %7s  %s\n", width,
                 terminal_safe(table_label(r)).c_str(),
                 static_cast<unsigned long long>(r.evaluations),
                 static_cast<unsigned long long>(r.failures),
                 static_cast<unsigned long long>(r.accepted), fmt_us(r.seed_us).c_str(),
                 fmt_us(r.best_us).c_str(), speed, floor.c_str(), terminal_safe(r.state).c_str());
  }
}

void print_winners(const std::vector<coordinator::TargetReport>& reports,
                   const std::string& run_option, const std::string& backend, FILE* to) {
  bool any = false;
  std::set<std::string> swept;  // targets of a shape sweep: one export, a dispatch table
  for (const auto& r : reports) {
    if (r.best_id.empty()) continue;
    if (!any)
      std::fprintf(to, backend == "triton" ? "\nwinning configurations:\n"
                                           : "\nwinning configurations (export one with the "
                                             "command below it):\n");
    any = true;
    std::fprintf(to, "  %s: %s, candidate %s\n", terminal_safe(table_label(r)).c_str(),
                 terminal_safe(r.best_label).c_str(),
                 terminal_safe(r.best_id.substr(0, 12)).c_str());
    if (!r.shape.empty()) {
      if (swept.insert(r.target).second) {
        std::fprintf(
            to, "    kiln export %s %s   (a dispatch table over every shape and GPU model)\n",
            terminal_safe(shell_quote(r.target)).c_str(), terminal_safe(run_option).c_str());
      }
      continue;
    }
    if (backend == "triton") {
      // kiln export writes C++ and CUDA launchers; a Triton kernel is its Python source.
      std::fprintf(to, "    its source, params and grid: best/%s.json in the output folder\n",
                   terminal_safe(coordinator::unit_key(r.target, r.gpu_model, r.shape)).c_str());
      continue;
    }
    std::string cmd = "kiln export " + shell_quote(r.target) + " " + run_option;
    if (!r.gpu_model.empty()) cmd += " --gpu-model " + shell_quote(r.gpu_model);
    const char* formats = backend == "cpu" ? "cpp|torch" : "cuda|torch|kernelbench";
    std::fprintf(to, "    %s --format %s\n", terminal_safe(cmd).c_str(), formats);
  }
}

std::string progress_line(const coordinator::TargetReport& r) {
  std::string line = table_label(r) + ": " + r.state + "; " + std::to_string(r.evaluations) +
                     " evals (" + std::to_string(r.failures) + " failed), " +
                     std::to_string(r.accepted) + " kept";
  if (r.seed_us > 0) line += "; seed " + fmt_us(r.seed_us) + " us";
  if (r.best_us > 0) {
    line += ", best " + fmt_us(r.best_us) + " us";
    if (r.seed_us > 0) {
      char speed[32];
      std::snprintf(speed, sizeof(speed), " (%.2fx)", r.seed_us / r.best_us);
      line += speed;
    }
  }
  if (r.fraction_of_floor > 0) line += ", " + floor_percent(r.fraction_of_floor) + " of the floor";
  return line;
}

std::string ProgressLines::update(const std::vector<coordinator::TargetReport>& reports,
                                  Clock::time_point now) {
  std::string out;
  for (const auto& r : reports) {
    const std::string line = progress_line(r);
    auto it = printed_.find(table_label(r));
    const bool news =
        it == printed_.end() || it->second.state != r.state || it->second.best_id != r.best_id;
    const bool moved =
        it != printed_.end() && it->second.line != line && now - it->second.at >= counters_every_;
    if (!news && !moved) continue;
    out += line + "\n";
    printed_[table_label(r)] = {r.state, r.best_id, line, now};
  }
  return out;
}

std::vector<std::pair<std::string, std::string>> status_fields(const coordinator::TargetReport& r) {
  // The fields of report_json(), as text (the target is the key they are stored under).
  const nlohmann::json fields = coordinator::report_json(r);  // alive through the loop
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& [key, value] : fields.items()) {
    if (key == "target") continue;
    out.emplace_back(key, value.is_string()         ? value.get<std::string>()
                          : value.is_number_float() ? num(value.get<double>())
                                                    : std::to_string(value.get<uint64_t>()));
  }
  return out;
}

coordinator::TargetReport report_from_fields(const std::string& target,
                                             const std::map<std::string, std::string>& f) {
  auto get = [&](const char* k) {
    auto it = f.find(k);
    return it == f.end() ? std::string() : it->second;
  };
  coordinator::TargetReport r;
  r.gpu_model = get("gpu_model");
  r.shape = get("shape");
  // Redis names a population on one model "target@model", of a sweep's shape "target-shape..."
  // (coordinator::unit_key); target names have neither character.
  r.target = target.substr(0, target.find_first_of("@-"));
  r.state = get("state");
  // Counts and times as kiln writes them; anything else (a negative count, which strtoull
  // wrapped to 2^64 - 3, a word, a NaN) shows as none.
  auto count = [&](const char* k) {
    const std::optional<int64_t> v = parse_int64(get(k));
    return v && *v >= 0 ? static_cast<uint64_t>(*v) : 0;
  };
  auto amount = [&](const char* k) {
    const std::string text = get(k);
    char* end = nullptr;
    const double v = std::strtod(text.c_str(), &end);
    return !text.empty() && end == text.c_str() + text.size() && std::isfinite(v) && v > 0 ? v
                                                                                           : 0.0;
  };
  r.evaluations = count("evaluations");
  r.failures = count("failures");
  r.accepted = count("accepted");
  r.seed_us = amount("seed_us");
  r.best_us = amount("best_us");
  r.fraction_of_floor = amount("fraction_of_floor");
  r.best_id = get("best_id");
  r.best_label = get("best");
  return r;
}

}  // namespace kiln::cli
