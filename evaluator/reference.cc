// Builds and loads a target's fp64 reference with the system compiler.
#include "evaluator/reference.h"

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "evaluator/reference_watch.h"
#include "shared/hash.h"
#include "shared/process.h"

namespace kiln::eval {
namespace fs = std::filesystem;

Result<std::unique_ptr<Reference>> Reference::build(const TargetSpec& target,
                                                    const std::string& cache_dir) {
  const char* cxx_env = std::getenv("CXX");
  std::string cxx = cxx_env && *cxx_env ? cxx_env : "c++";
  // -O2 without -ffast-math: the reference must keep IEEE semantics (NaN, Inf, rounding).
  std::vector<std::string> flags = {"-std=c++17", "-O2", "-fPIC", "-shared"};
  Sha256 h;
  h.add(target.reference_source).add(cxx);
  for (const auto& f : flags) h.add(f);
  std::string key = h.hex();

  std::error_code ec;
  fs::create_directories(fs::path(cache_dir) / "reference", ec);
  fs::path so = fs::path(cache_dir) / "reference" / (target.name + "-" + key.substr(0, 16) + ".so");
  if (!fs::exists(so)) {
    fs::path src = so;
    src.replace_extension(".cpp");
    std::ofstream(src) << target.reference_source;
    // Build to a private name, then rename: concurrent builders never see a torn file.
    fs::path tmp = so.string() + ".tmp" + std::to_string(getpid());
    std::vector<std::string> argv = {cxx};
    argv.insert(argv.end(), flags.begin(), flags.end());
    argv.insert(argv.end(), {src.string(), "-o", tmp.string()});
    KILN_ASSIGN_OR_RETURN(ProcessResult r, run_process(argv, std::chrono::seconds(120)));
    if (r.timed_out || r.exit_code != 0) {
      return invalid_argument("compiling the reference of target '" + target.name + "' (" +
                              target.reference_file + ") failed:\n" + r.output);
    }
    fs::rename(tmp, so, ec);
    if (ec) return unavailable("installing " + so.string() + ": " + ec.message());
  }
  void* handle = dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) return internal_error(std::string("loading the reference: ") + dlerror());
  auto fn = reinterpret_cast<ReferenceFn>(dlsym(handle, "kiln_reference"));
  if (!fn) {
    dlclose(handle);
    return invalid_argument(target.reference_file + " defines no extern \"C\" kiln_reference");
  }
  auto rows = reinterpret_cast<ReferenceRowsFn>(dlsym(handle, "kiln_reference_rows"));
  auto terms = reinterpret_cast<ReferenceTermsFn>(dlsym(handle, "kiln_reference_terms"));
  return std::unique_ptr<Reference>(new Reference(
      handle, fn, rows, terms,
      "the reference of target '" + target.name + "' (" + target.reference_file + ")"));
}

Reference::~Reference() {
  if (handle_) dlclose(handle_);
}

namespace {

// Runs `call`, watched; a throw becomes the call's error.
template <typename F>
Status watched(const std::string& what, std::chrono::milliseconds deadline, F&& call) {
  WatchedReferenceCall watch(what, deadline);
  try {
    call();
  } catch (const std::exception& e) {
    return internal_error(what + " threw: " + e.what());
  } catch (...) {
    return internal_error(what + " threw an exception that is not a std::exception");
  }
  return Status::ok();
}

}  // namespace

Status Reference::compute(const std::vector<const double*>& inputs,
                          const std::vector<double*>& outputs, const std::vector<int64_t>& dims,
                          const std::vector<double>& scalars) const {
  return watched(what_ + ", kiln_reference,", deadline_,
                 [&] { fn_(inputs.data(), outputs.data(), dims.data(), scalars.data()); });
}

Status Reference::compute_rows(const std::vector<const double*>& inputs,
                               const std::vector<double*>& outputs,
                               const std::vector<int64_t>& dims, const std::vector<double>& scalars,
                               const std::vector<int64_t>& rows) const {
  return by_rows(rows_fn_, "kiln_reference_rows", inputs, outputs, dims, scalars, rows);
}

Status Reference::compute_terms(const std::vector<const double*>& inputs,
                                const std::vector<double*>& terms, const std::vector<int64_t>& dims,
                                const std::vector<double>& scalars,
                                const std::vector<int64_t>& rows) const {
  return by_rows(terms_fn_, "kiln_reference_terms", inputs, terms, dims, scalars, rows);
}

Status Reference::by_rows(ReferenceRowsFn fn, const char* name,
                          const std::vector<const double*>& inputs,
                          const std::vector<double*>& outputs, const std::vector<int64_t>& dims,
                          const std::vector<double>& scalars,
                          const std::vector<int64_t>& rows) const {
  const std::string what = what_ + ", " + name + ",";
  const size_t n = rows.size();
  const size_t threads = std::clamp<size_t>(n / kMinRowsPerThread, 1, threads_);
  if (threads == 1) {
    return watched(what, deadline_, [&] {
      fn(inputs.data(), outputs.data(), dims.data(), scalars.data(), rows.data(),
         static_cast<int64_t>(n));
    });
  }
  // Every threads-th row from t: a row's cost may grow with its index (a causal attention row),
  // so interleaved parts cost alike where contiguous ones would not. Each part is watched on its
  // own, and every thread is joined before the first error is returned.
  std::vector<Status> errors(threads);
  auto part = [&](size_t t) {
    std::vector<int64_t> mine;
    for (size_t i = t; i < n; i += threads) mine.push_back(rows[i]);
    errors[t] = watched(what, deadline_, [&] {
      fn(inputs.data(), outputs.data(), dims.data(), scalars.data(), mine.data(),
         static_cast<int64_t>(mine.size()));
    });
  };
  std::vector<std::thread> pool;
  for (size_t t = 1; t < threads; ++t) pool.emplace_back(part, t);
  part(0);
  for (auto& th : pool) th.join();
  for (Status& e : errors) {
    if (!e.is_ok()) return e;
  }
  return Status::ok();
}

size_t default_reference_threads() {
  const size_t cores = std::max(1u, std::thread::hardware_concurrency());
  return std::clamp<size_t>(cores / 2, 1, 8);
}

}  // namespace kiln::eval
