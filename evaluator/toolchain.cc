// Builds a backend's caching compiler.
#include "evaluator/toolchain.h"

#include <cstdlib>
#include <filesystem>

#include "evaluator/cpu/cpu_compiler.h"
#include "evaluator/cuda/nvrtc_compiler.h"
#include "evaluator/triton/triton_compiler.h"

namespace kiln::eval {

Result<std::unique_ptr<Toolchain>> Toolchain::create(const std::string& backend,
                                                     const std::string& cache_dir) {
  std::unique_ptr<Toolchain> t(new Toolchain());
  if (backend == "cuda") {
    KILN_ASSIGN_OR_RETURN(auto nvrtc, cuda::NvrtcCompiler::load());
    t->inner_ = std::move(nvrtc);
  } else if (backend == "cpu") {
    KILN_ASSIGN_OR_RETURN(auto cpu, CpuCompiler::create());
    t->inner_ = std::move(cpu);
  } else if (backend == "triton") {
    TritonCompilerOptions options;
    options.cache_dir = cache_dir + "/triton";
    KILN_ASSIGN_OR_RETURN(auto triton, TritonCompiler::create(std::move(options)));
    t->inner_ = std::move(triton);
  } else {
    return invalid_argument("unknown backend '" + backend + "' (use cuda, cpu or triton)");
  }
  t->cached_ = std::make_unique<CachingCompiler>(*t->inner_, CompileCache(cache_dir + "/compile"));
  return t;
}

std::string default_cache_dir() {
  if (const char* d = std::getenv("KILN_CACHE_DIR"); d && *d) return d;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return std::string(x) + "/kiln";
  if (const char* h = std::getenv("HOME"); h && *h) return std::string(h) + "/.cache/kiln";
  return "/tmp/kiln-cache";
}

Status make_cache_dir(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec || !std::filesystem::is_directory(dir, ec)) {
    return invalid_argument("--cache-dir " + dir + ": cannot create it (" +
                            (ec ? ec.message() : std::string("not a folder")) + ")");
  }
  return Status::ok();
}

}  // namespace kiln::eval
