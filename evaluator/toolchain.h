// The compiler of a backend, wrapped in the on-disk compile cache: what `kiln eval` and the
// evaluator daemon compile candidates with.
#pragma once

#include <memory>
#include <string>

#include "evaluator/backend.h"
#include "evaluator/compile_cache.h"

namespace kiln::eval {

class Toolchain {
 public:
  // "cuda" (NVRTC, loaded at run time), "cpu" (the system C++ compiler) or "triton" (Triton's
  // compile worker; Triton's own cache under <cache_dir>/triton); binaries are cached under
  // <cache_dir>/compile.
  static Result<std::unique_ptr<Toolchain>> create(const std::string& backend,
                                                   const std::string& cache_dir);
  Compiler& compiler() { return *cached_; }

 private:
  Toolchain() = default;
  std::unique_ptr<Compiler> inner_;
  std::unique_ptr<CachingCompiler> cached_;
};

// Default work/cache folder: $KILN_CACHE_DIR, else $XDG_CACHE_HOME/kiln, else ~/.cache/kiln.
std::string default_cache_dir();

// Creates `dir` (a --cache-dir) or says why it cannot be: "--cache-dir DIR: cannot create it
// (...)". Workers that cannot write their cache would fail at every task.
Status make_cache_dir(const std::string& dir);

}  // namespace kiln::eval
