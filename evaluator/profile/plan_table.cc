// Text tables for `kiln profile` (see plan_table.h). Gains are printed as "1.24x": the whole
// program's speedup if only that kernel (or target type) became plan.speedup times faster.
#include "evaluator/profile/plan_table.h"

#include <algorithm>
#include <cstdio>

namespace kiln::profile {
namespace {

std::string format(const char* fmt, auto... args) {
  char buf[512];
  std::snprintf(buf, sizeof(buf), fmt, args...);
  return buf;
}

double ms(uint64_t ns) { return static_cast<double>(ns) / 1e6; }

}  // namespace

std::string short_kernel_name(const std::string& name, size_t width) {
  std::string s = name;
  if (s.rfind("void ", 0) == 0) s.erase(0, 5);
  // Drop the trailing parameter list "(...)" of a demangled function, keeping template arguments.
  if (!s.empty() && s.back() == ')') {
    int depth = 0;
    for (size_t i = s.size(); i-- > 0;) {
      if (s[i] == ')') ++depth;
      if (s[i] == '(' && --depth == 0) {
        if (i > 0) s.erase(i);
        break;
      }
    }
  }
  if (s.size() > width && width > 3) s = s.substr(0, width - 3) + "...";
  return s;
}

std::string format_ranking(const Plan& plan, size_t top) {
  const std::string gain_head = format("gain@%gx", plan.speedup);
  std::string out;
  out += format("%4s  %-60s %8s %11s %7s  %-16s %9s\n", "rank", "kernel", "calls", "total ms",
                "share%", "target", gain_head.c_str());
  const size_t shown = std::min(top, plan.kernels.size());
  for (size_t i = 0; i < shown; ++i) {
    const PlanKernel& k = plan.kernels[i];
    out += format("%4zu  %-60s %8llu %11.3f %7.2f  %-16s %8.3fx\n", i + 1,
                  short_kernel_name(k.name, 60).c_str(), static_cast<unsigned long long>(k.calls),
                  ms(k.total_ns), 100 * k.share, k.target.empty() ? "-" : k.target.c_str(),
                  k.end_to_end_speedup);
  }
  if (shown < plan.kernels.size()) {
    uint64_t rest_ns = 0;
    for (size_t i = shown; i < plan.kernels.size(); ++i) rest_ns += plan.kernels[i].total_ns;
    out += format("      ... %zu more kernels: %.3f ms (%.2f%%)\n", plan.kernels.size() - shown,
                  ms(rest_ns),
                  plan.total_gpu_ns ? 100.0 * static_cast<double>(rest_ns) / plan.total_gpu_ns : 0.0);
  }
  out += "\n";
  out += format("%-18s %8s %8s %11s %7s %9s\n", "target", "kernels", "calls", "total ms", "share%",
                gain_head.c_str());
  uint64_t mapped_ns = 0;
  for (const PlanTarget& t : plan.targets) {
    mapped_ns += t.total_ns;
    out += format("%-18s %8llu %8llu %11.3f %7.2f %8.3fx\n", t.target.c_str(),
                  static_cast<unsigned long long>(t.kernels),
                  static_cast<unsigned long long>(t.calls), ms(t.total_ns), 100 * t.share,
                  t.end_to_end_speedup);
  }
  uint64_t unmapped_kernels = 0, unmapped_calls = 0;
  for (const PlanKernel& k : plan.kernels) {
    if (!k.target.empty()) continue;
    ++unmapped_kernels;
    unmapped_calls += k.calls;
  }
  out += format("%-18s %8llu %8llu %11.3f %7.2f %9s\n", "(unmapped)",
                static_cast<unsigned long long>(unmapped_kernels),
                static_cast<unsigned long long>(unmapped_calls),
                ms(plan.total_gpu_ns - mapped_ns), 100 * plan.unmapped_share, "-");
  const double mapped_share = 1.0 - plan.unmapped_share;
  out += "\n";
  out += format("total GPU time %.3f ms in %llu kernel launches (%zu kernels, %llu processes)\n",
                ms(plan.total_gpu_ns), static_cast<unsigned long long>(plan.total_calls),
                plan.kernels.size(), static_cast<unsigned long long>(plan.processes));
  out += format("mapped to kiln targets: %.2f%%; every mapped kernel %gx faster: %.3fx end to end\n",
                100 * mapped_share, plan.speedup,
                plan.total_gpu_ns ? amdahl_speedup(mapped_share, plan.speedup) : 1.0);
  return out;
}

std::string format_shapes(const Plan& plan, uint64_t with_range, uint64_t kernels) {
  if (with_range == 0) {
    return "shapes: no kernel ran inside an NVTX range; for PyTorch, run the step under "
           "torch.autograd.profiler.emit_nvtx(record_shapes=True) to record its operators' "
           "shapes\n";
  }
  constexpr size_t kShown = 8;
  std::string out = format(
      "\nshapes recovered from NVTX ranges (%llu of %llu kernel launches "
      "ran inside one):\n",
      static_cast<unsigned long long>(with_range), static_cast<unsigned long long>(kernels));
  bool any = false;
  for (const PlanTarget& t : plan.targets) {
    if (t.shapes.empty()) continue;
    any = true;
    for (size_t i = 0; i < t.shapes.size() && i < kShown; ++i) {
      const PlanShape& s = t.shapes[i];
      out += format("  %-16s %-28s %8llu calls %11.3f ms\n", i == 0 ? t.target.c_str() : "",
                    shape_string(s.shape).c_str(), static_cast<unsigned long long>(s.calls),
                    ms(s.total_ns));
    }
    if (t.shapes.size() > kShown) {
      out += format("  %-16s ... and %zu more (all in the plan)\n", "", t.shapes.size() - kShown);
    }
  }
  if (!any)
    out += "  none: no range named an operator kiln recovers shapes from (docs/profile.md)\n";
  else
    out += "sweep them: kiln run --shapes PLAN.json (the plan as a sweep file)\n";
  return out;
}

}  // namespace kiln::profile
