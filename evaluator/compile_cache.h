// The on-disk compile cache shared by both backends (cubins, shared objects), keyed by a content
// hash of everything that determines the binary, and CachingCompiler, which puts it in front of
// any Compiler.
#pragma once

#include <future>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "evaluator/backend.h"
#include "shared/status.h"

namespace kiln::eval {

// The cache key of `request` for a compiler of `backend` at `toolchain_version`: hex SHA-256 over
// a key-format version, backend, toolchain, source, kernel name, arch, every define (in key order)
// and the signature. Compilers fill CompileOutput::cache_key with it, and CachingCompiler looks
// entries up with it before compiling. HAZARD: a backend's fixed compiler flags are not in the
// key; changing them requires bumping kCompileKeyFormat in compile_cache.cc.
std::string compile_cache_key(const CompileRequest& request, std::string_view backend,
                              std::string_view toolchain_version);

// A directory of binaries, one file per key (<dir>/<first two hex digits>/<key>), each stored
// with a SHA-256 of its bytes so that a damaged file reads as a miss. Writers create a temporary
// file, fsync it and rename it into place, so concurrent writers (threads or processes) and
// crashes never leave a torn entry under a key. Thread-safe; holds no state but the path.
class CompileCache {
 public:
  explicit CompileCache(std::string dir);

  // The bytes stored under `key`, or nullopt when absent, unreadable or damaged.
  std::optional<std::string> get(const std::string& key) const;

  // Stores `bytes` under `key` (a lower-case hex digest), replacing any entry. Creates the
  // directory as needed.
  Status put(const std::string& key, const std::string& bytes) const;

  const std::string& dir() const { return dir_; }

 private:
  std::string path_of(const std::string& key) const;

  std::string dir_;
};

// A Compiler that serves repeated requests from a CompileCache: a hit returns from_cache=true,
// compile_ms=0, an empty log and the stored bytes; a miss compiles with `inner` and stores the
// binary when (and only when) the compile succeeded. A failed cache write does not fail the
// compile: it is noted in the log. A request whose key another thread is compiling waits for
// that compile and gets its output (a prefetch and the evaluation that needs it compile once).
// `inner` must outlive this object; thread-safe when `inner` is.
class CachingCompiler final : public Compiler {
 public:
  CachingCompiler(Compiler& inner, CompileCache cache);

  std::string backend() const override { return inner_.backend(); }
  std::string toolchain_version() const override { return inner_.toolchain_version(); }
  CompileOutput compile(const CompileRequest& request) override;

 private:
  Compiler& inner_;
  CompileCache cache_;
  std::mutex mutex_;
  std::map<std::string, std::shared_future<CompileOutput>> in_flight_;  // guarded by mutex_
};

}  // namespace kiln::eval
