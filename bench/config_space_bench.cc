// Start-up cost of a template's search space: how long enumerating every configuration that meets
// the constraints takes, per built-in template and backend, with for_each_config (constraints
// parsed once, then evaluated per combination) against checking each combination with
// satisfies_constraints (which parses every constraint again: what the engine and `kiln eval
// --sweep` did before). The coordinator enumerates each template once before workers connect.
//   build/bench/kiln_bench_config_space [--targets-dir DIR] [--repeat N]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "evaluator/evaluation.h"
#include "shared/target_spec.h"

using namespace kiln;
using Config = std::map<std::string, std::string>;
using Clock = std::chrono::steady_clock;

namespace {

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

size_t combinations(const KernelSpec& k) {
  size_t n = 1;
  for (const auto& [name, values] : k.space) n *= values.size();
  return n;
}

// The per-call path: every combination, first parameter fastest, checked on its own.
size_t count_per_call(const KernelSpec& k, const Shape& shape, DType dtype) {
  size_t kept = 0;
  eval::for_each_combination(k, [&](const Config& c) {
    Result<bool> ok = eval::satisfies_constraints(k, shape, dtype, c);
    kept += ok.is_ok() && *ok;
    return true;
  });
  return kept;
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir = default_targets_dir();
  int repeat = 3;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--targets-dir") && i + 1 < argc) {
      dir = argv[++i];
    } else if (!std::strcmp(argv[i], "--repeat") && i + 1 < argc) {
      repeat = std::max(1, std::atoi(argv[++i]));
    } else {
      std::fprintf(stderr, "usage: %s [--targets-dir DIR] [--repeat N]\n", argv[0]);
      return 2;
    }
  }
  std::printf("%-18s %-5s %12s %9s %14s %14s %8s\n", "target", "bknd", "combinations", "admitted",
              "per-call ms", "compiled ms", "speedup");
  double total_old = 0, total_new = 0;
  for (const char* name : {"rmsnorm", "softmax", "reduce", "layernorm", "rotary_embedding", "cross_entropy",
                           "matmul", "flash_attention", "fused_mlp"}) {
    auto t = load_target(dir + "/" + name);
    if (!t.is_ok()) {
      std::fprintf(stderr, "%s\n", t.status().to_string().c_str());
      return 1;
    }
    for (const char* backend : {"cuda", "cpu"}) {
      const BackendSpec* b = t->backend(backend);
      if (!b || !b->tunable) continue;
      const Shape shape = t->benchmark_for(backend);
      const DType dtype = b->dtypes.front();
      double best_old = 1e300, best_new = 1e300;
      size_t admitted_old = 0, admitted_new = 0;
      for (int r = 0; r < repeat; ++r) {  // best of N: the least disturbed run
        auto t0 = Clock::now();
        admitted_old = count_per_call(*b->tunable, shape, dtype);
        best_old = std::min(best_old, ms_since(t0));
        t0 = Clock::now();
        admitted_new = 0;
        eval::for_each_config(*b->tunable, shape, dtype, [&](const Config&) {
          ++admitted_new;
          return true;
        });
        best_new = std::min(best_new, ms_since(t0));
      }
      if (admitted_old != admitted_new) {
        std::fprintf(stderr, "%s %s: the two paths disagree (%zu against %zu)\n", name, backend, admitted_old,
                     admitted_new);
        return 1;
      }
      total_old += best_old;
      total_new += best_new;
      std::printf("%-18s %-5s %12zu %9zu %14.1f %14.1f %7.1fx\n", name, backend, combinations(*b->tunable),
                  admitted_new, best_old, best_new, best_old / std::max(best_new, 1e-3));
    }
  }
  std::printf("%-18s %-5s %12s %9s %14.1f %14.1f %7.1fx\n", "all", "", "", "", total_old, total_new,
              total_old / std::max(total_new, 1e-3));
  return 0;
}
